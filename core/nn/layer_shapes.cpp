#include "nn/layer_shapes.hpp"

#include "errors.hpp"
#include "kernels/cpu/conv.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>

namespace trainhost::nn {

std::size_t element_count(const SampleShape& shape) noexcept {
    std::size_t n = 1;
    for (std::size_t d : shape) n *= d;
    return n;
}

namespace {

// Window positions along one image dimension, as the kernels count them.
std::size_t window_outputs(std::size_t extent, std::size_t kernel, std::size_t stride) {
    return static_cast<std::size_t>(kernels::cpu::outputs(static_cast<int>(extent), static_cast<int>(kernel),
                                                          static_cast<int>(stride)));
}

// "file:line:column: text", or the text alone for a spec made in code (no place in a file).
std::string placed(const std::string& origin, const std::string& text) {
    return origin.empty() ? text : origin + ": " + text;
}

// `input_from`: where the input's shape comes from, for the message.
SampleShape output_of(const config::LayerSpec& layer, std::size_t index, const SampleShape& in,
                      const std::string& input_from) {
    const auto fail = [&](const std::string& why) -> ConfigError {
        return ConfigError(placed(layer.origin, fmt::format("[model] layer {} ({}){}", index + 1, layer.type, why)));
    };
    if (layer.type == "dense") return {layer.units};
    if (layer.type == "flatten") return {element_count(in)};
    if (layer.type == "conv2d" || layer.type == "max_pool2d") {
        if (in.size() != 3)
            throw fail(fmt::format(" needs samples shaped [channels, height, width], not {} dimension(s) ({})", in.size(),
                                   input_from));
        const std::size_t pad = layer.type == "conv2d" ? 2 * layer.padding : 0;
        const std::size_t h = window_outputs(in[1] + pad, layer.kernel, layer.stride);
        const std::size_t w = window_outputs(in[2] + pad, layer.kernel, layer.stride);
        if (h < 1 || w < 1)
            throw fail(fmt::format(": kernel {} does not fit a {}x{} input{}", layer.kernel, in[1], in[2],
                                   pad > 0 ? fmt::format(" padded by {}", layer.padding) : std::string()));
        return {layer.type == "conv2d" ? layer.units : in[0], h, w};
    }
    return in;  // activations and dropout keep the shape
}

}  // namespace

std::vector<LayerShape> plan_layer_shapes(const config::ModelSpec& spec, const SampleShape& sample_shape,
                                          std::size_t output_width) {
    std::vector<LayerShape> plan;
    SampleShape shape = sample_shape;
    std::string input_from = fmt::format("the data's samples are [{}]", fmt::join(sample_shape, ", "));
    // The kernels index a sample's values (a dense layer's width, a GEMM dimension) with int.
    constexpr std::size_t kMostValues = std::numeric_limits<int>::max();
    if (element_count(shape) > kMostValues)
        throw ConfigError(fmt::format("[model] {}, {} values each, more than a layer takes ({})", input_from,
                                      element_count(shape), kMostValues));
    for (std::size_t i = 0; i < spec.layers.size(); ++i) {
        SampleShape next = output_of(spec.layers[i], i, shape, input_from);
        if (element_count(next) > kMostValues)
            throw ConfigError(placed(spec.layers[i].origin,
                                     fmt::format("[model] layer {} ({}) makes samples of {} values ([{}]), more than a "
                                                 "layer takes ({})",
                                                 i + 1, spec.layers[i].type, element_count(next), fmt::join(next, ", "),
                                                 kMostValues)));
        if (next != shape)
            input_from = fmt::format("layer {} ({}) makes them [{}]", i + 1, spec.layers[i].type, fmt::join(next, ", "));
        plan.push_back({std::move(shape), next});
        shape = std::move(next);
    }
    if (element_count(shape) != output_width) {
        throw ConfigError(placed(spec.layers.empty() ? std::string() : spec.layers.back().origin,
                                 fmt::format("[model] the last layer has width {}, but the data needs {} outputs",
                                             element_count(shape), output_width)));
    }
    return plan;
}

}  // namespace trainhost::nn
