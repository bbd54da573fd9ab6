// One sample's shape through the config's layers, worked out from the data's
// sample shape alone. The session runs it as soon as the data is loaded, so a
// model that cannot take its data (a conv2d after flatten, a kernel larger than
// the image, a last width that is not the number of outputs) is refused with the
// layer's file:line before any plugin loads or any buffer is allocated; the
// model builds its layers from the same plan.
#pragma once

#include "config/run_config.hpp"

#include <cstddef>
#include <vector>

namespace trainhost::nn {

using SampleShape = std::vector<std::size_t>;  // e.g. {1, 28, 28} for images or {3072}

struct LayerShape {
    SampleShape input;
    SampleShape output;
};

// [i] is the config's layer i. Throws ConfigError naming the layer's position in
// the config when a layer does not fit what comes into it, or when the last
// layer's width is not `output_width`.
[[nodiscard]] std::vector<LayerShape> plan_layer_shapes(const config::ModelSpec& spec, const SampleShape& sample_shape,
                                                        std::size_t output_width);

[[nodiscard]] std::size_t element_count(const SampleShape& shape) noexcept;

}  // namespace trainhost::nn
