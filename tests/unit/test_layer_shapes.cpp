#include "errors.hpp"
#include "nn/layer_shapes.hpp"

#include <catch2/catch.hpp>

using trainhost::nn::plan_layer_shapes;
using trainhost::nn::SampleShape;

namespace {

trainhost::config::LayerSpec at(trainhost::config::LayerSpec layer, int line) {
    layer.origin = "run.toml:" + std::to_string(line) + ":3";
    return layer;
}

}  // namespace

TEST_CASE("the example CNN's shapes, layer by layer, as PyTorch gives them", "[model][shapes]") {
    // examples/fashion_mnist_cnn.toml: conv 3x3 pad 1, pool 2, twice, then dense.
    const trainhost::config::ModelSpec spec{{{"conv2d", 16, 0, 3, 1, 1},
                                             {"relu"},
                                             {"max_pool2d", 0, 0, 2, 2, 0},
                                             {"conv2d", 32, 0, 3, 1, 1},
                                             {"relu"},
                                             {"max_pool2d", 0, 0, 2, 2, 0},
                                             {"flatten"},
                                             {"dense", 128},
                                             {"relu"},
                                             {"dense", 10}},
                                            "cross_entropy"};
    const auto plan = plan_layer_shapes(spec, {1, 28, 28}, 10);
    const std::vector<SampleShape> outputs = {{16, 28, 28}, {16, 28, 28}, {16, 14, 14}, {32, 14, 14}, {32, 14, 14},
                                              {32, 7, 7},   {1568},       {128},        {128},        {10}};
    REQUIRE(plan.size() == outputs.size());
    for (std::size_t i = 0; i < plan.size(); ++i) {
        INFO("layer " << i + 1);
        CHECK(plan[i].output == outputs[i]);
        CHECK(plan[i].input == (i == 0 ? SampleShape{1, 28, 28} : outputs[i - 1]));
    }
}

TEST_CASE("strided and unpadded windows round down as PyTorch's do", "[model][shapes]") {
    // floor((28 + 2*0 - 5) / 2) + 1 = 12; pool 3 stride 2 on 12: floor((12 - 3) / 2) + 1 = 5.
    const trainhost::config::ModelSpec spec{
        {{"conv2d", 4, 0, 5, 2, 0}, {"max_pool2d", 0, 0, 3, 2, 0}, {"dense", 3}}, "cross_entropy"};
    const auto plan = plan_layer_shapes(spec, {2, 28, 30}, 3);
    CHECK(plan[0].output == SampleShape{4, 12, 13});
    CHECK(plan[1].output == SampleShape{4, 5, 6});
    CHECK(plan[2].input == SampleShape{4, 5, 6});  // a dense layer takes the image as it is, flattened
}

TEST_CASE("a layer that cannot take its input is named with its place in the config", "[model][shapes]") {
    using Catch::Matchers::Equals;
    const auto refusal = [](const trainhost::config::ModelSpec& spec, const SampleShape& sample, std::size_t outputs) {
        try {
            (void)plan_layer_shapes(spec, sample, outputs);
        } catch (const trainhost::ConfigError& e) {
            return std::string(e.what());
        }
        return std::string("(accepted)");
    };
    CHECK_THAT(refusal({{at({"flatten"}, 4), at({"conv2d", 2, 0, 3, 1, 0}, 5), at({"dense", 10}, 6)}}, {1, 8, 8}, 10),
               Equals("run.toml:5:3: [model] layer 2 (conv2d) needs samples shaped [channels, height, width], not 1 "
                      "dimension(s) (layer 1 (flatten) makes them [64])"));
    CHECK_THAT(refusal({{at({"conv2d", 2, 0, 5, 1, 1}, 4), at({"dense", 10}, 5)}}, {1, 2, 2}, 10),
               Equals("run.toml:4:3: [model] layer 1 (conv2d): kernel 5 does not fit a 2x2 input padded by 1"));
    CHECK_THAT(refusal({{at({"max_pool2d", 0, 0, 2, 2, 0}, 4), at({"max_pool2d", 0, 0, 2, 2, 0}, 5)}}, {3, 3, 3}, 3),
               Equals("run.toml:5:3: [model] layer 2 (max_pool2d): kernel 2 does not fit a 1x1 input"));
    CHECK_THAT(refusal({{at({"dense", 4}, 4), at({"tanh"}, 5)}}, {8}, 3),
               Equals("run.toml:5:3: [model] the last layer has width 4, but the data needs 3 outputs"));
    // Past a layer's int width: refused at the plan, not a GEMM's "negative dimension" mid-fit
    // (at 2^31) or a dense layer that sees no input (at 2^32).
    CHECK_THAT(refusal({{at({"conv2d", 4, 0, 1, 1, 0}, 4), at({"flatten"}, 5), at({"dense", 10}, 6)}}, {1, 30000, 30000},
                       10),
               Equals("run.toml:4:3: [model] layer 1 (conv2d) makes samples of 3600000000 values ([4, 30000, 30000]), "
                      "more than a layer takes (2147483647)"));
    CHECK_THAT(refusal({{at({"dense", 10}, 4)}}, {2, 65536, 65536}, 10),
               Equals("[model] the data's samples are [2, 65536, 65536], 8589934592 values each, more than a layer takes "
                      "(2147483647)"));
}
