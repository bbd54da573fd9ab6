// The CPU backend's libraries, chosen by measurement: the work of one training step
// of each bench/configs workload, through OpenBLAS and through oneDNN.
//  - gemm_step/<workload>: every GEMM of a step's dense layers (forward, weight
//    gradient, input gradient), with the shapes and transposes core/nn/layers.cpp
//    passes, through cblas_sgemm (what kernels/cpu runs) and dnnl_sgemm;
//  - conv_step/<layer>: one conv2d layer of the CNN at batch 64, forward and
//    backward (weights, bias, and the input where the layer has one to pass back):
//    im2col and one OpenBLAS GEMM per sample (trainhost's convolution before
//    oneDNN's), oneDNN's primitives on trainhost's NCHW tensors ("plain"), and
//    kernels/cpu's Convolution: oneDNN in the layouts it picks, with the reorders
//    from and to NCHW counted, as a backend that keeps NCHW between layers runs it.
// Before timing, each result is checked against im2col on the same random data, so
// every side is known to do the same work.
#include "im2col_convolution.hpp"
#include "kernels/cpu/blas.hpp"
#include "kernels/cpu/conv.hpp"

#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace cpu = trainhost::kernels::cpu;

namespace {

std::vector<float> random_values(std::size_t count, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> values(count);
    for (float& v : values) v = uniform(rng);
    return values;
}

// Largest |a - b| over max(1, |b|): each side sums in its own order, so they agree
// to rounding, not bit for bit (a weight gradient sums 64 x 784 products in fp32).
// Work done wrong (a layout or a transpose mixed up) is off by the values' own size.
// NaN anywhere fails.
void require_close(const std::string& what, const std::vector<float>& got, const std::vector<float>& want) {
    double worst = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        const double error = std::abs(double(got[i]) - want[i]) / std::max(1.0, std::abs(double(want[i])));
        if (!(error <= 1e-3)) {
            std::fprintf(stderr, "%s: the two sides differ at %zu: %g against %g\n", what.c_str(), i,
                         double(got[i]), double(want[i]));
            std::exit(1);
        }
        worst = std::max(worst, error);
    }
    std::fprintf(stderr, "checked %-32s largest relative difference %.1e\n", what.c_str(), worst);
}

// ---- dense layers -------------------------------------------------------------------

struct Gemm {
    bool transpose_a, transpose_b;
    int m, n, k;
};

// The GEMMs of one training step of dense layers in -> out at `batch` rows, as
// Dense::forward and Dense::backward issue them (the first layer passes no input
// gradient back).
std::vector<Gemm> dense_step(int batch, const std::vector<int>& widths) {
    std::vector<Gemm> calls;
    for (std::size_t layer = 0; layer + 1 < widths.size(); ++layer) {
        const int in = widths[layer], out = widths[layer + 1];
        calls.push_back({false, true, batch, out, in});   // y = x W^T
        calls.push_back({true, false, out, in, batch});   // dW = dy^T x
        if (layer > 0) calls.push_back({false, false, batch, in, out});  // dx = dy W
    }
    return calls;
}

struct GemmOperands {
    std::vector<float> a, b, c;
};

std::vector<GemmOperands> operands_for(const std::vector<Gemm>& calls) {
    std::vector<GemmOperands> operands;
    unsigned seed = 1;
    for (const Gemm& g : calls) {
        operands.push_back({random_values(std::size_t(g.m) * g.k, seed), random_values(std::size_t(g.k) * g.n, seed + 1),
                            std::vector<float>(std::size_t(g.m) * g.n)});
        seed += 2;
    }
    return operands;
}

void run_openblas(const Gemm& g, GemmOperands& o) {
    cpu::gemm(g.transpose_a, g.transpose_b, g.m, g.n, g.k, 1.0f, o.a.data(), g.transpose_a ? g.m : g.k, o.b.data(),
              g.transpose_b ? g.k : g.n, 0.0f, o.c.data(), g.n);
}

void run_onednn(const Gemm& g, GemmOperands& o) {
    const dnnl_status_t status =
        dnnl_sgemm(g.transpose_a ? 'T' : 'N', g.transpose_b ? 'T' : 'N', g.m, g.n, g.k, 1.0f, o.a.data(),
                   g.transpose_a ? g.m : g.k, o.b.data(), g.transpose_b ? g.k : g.n, 0.0f, o.c.data(), g.n);
    if (status != dnnl_success) throw std::runtime_error("dnnl_sgemm failed with status " + std::to_string(status));
}

struct Workload {
    const char* name;
    int batch;
    std::vector<int> widths;
};

// bench/configs: the MLP, the autoencoder, and the CNN's dense layers (32 x 7 x 7 in).
const std::vector<Workload>& workloads() {
    static const std::vector<Workload> all = {
        {"mlp_fashion_mnist", 64, {784, 256, 128, 10}},
        {"autoencoder", 32, {3072, 2048, 6, 3072}},
        {"cnn_fashion_mnist_dense", 64, {1568, 128, 10}},
    };
    return all;
}

template <void (*Run)(const Gemm&, GemmOperands&)>
void gemm_step(benchmark::State& state, const Workload& workload) {
    const std::vector<Gemm> calls = dense_step(workload.batch, workload.widths);
    std::vector<GemmOperands> operands = operands_for(calls);
    for (auto _ : state) {
        for (std::size_t i = 0; i < calls.size(); ++i) Run(calls[i], operands[i]);
        benchmark::ClobberMemory();
    }
    state.counters["samples/s"] = benchmark::Counter(double(workload.batch), benchmark::Counter::kIsIterationInvariantRate);
}

void check_gemms() {
    for (const Workload& workload : workloads()) {
        const std::vector<Gemm> calls = dense_step(workload.batch, workload.widths);
        std::vector<GemmOperands> ours = operands_for(calls), theirs = operands_for(calls);
        for (std::size_t i = 0; i < calls.size(); ++i) {
            run_openblas(calls[i], ours[i]);
            run_onednn(calls[i], theirs[i]);
            require_close(std::string(workload.name) + " gemm " + std::to_string(i), theirs[i].c, ours[i].c);
        }
    }
}

// ---- convolution ------------------------------------------------------------------

struct ConvLayer {
    const char* name;
    cpu::ConvShape shape;
    bool passes_input_gradient;
};

// The CNN's two convolutions at batch 64 (examples/fashion_mnist_cnn.toml).
const std::vector<ConvLayer>& conv_layers() {
    static const std::vector<ConvLayer> all = {
        {"cnn_conv1_1x28x28_to_16", {64, 1, 28, 28, 16, 3, 1, 1}, false},
        {"cnn_conv2_16x14x14_to_32", {64, 16, 14, 14, 32, 3, 1, 1}, true},
    };
    return all;
}

struct ConvTensors {
    std::vector<float> x, weight, bias, y, dy, dweight, dbias, dx;
    ConvTensors(const cpu::ConvShape& s)
        : x(random_values(std::size_t(s.batch) * s.channels * s.height * s.width, 11)),
          weight(random_values(std::size_t(s.filters) * s.channels * s.kernel * s.kernel, 12)),
          bias(random_values(std::size_t(s.filters), 13)),
          y(std::size_t(s.batch) * s.filters * s.out_height() * s.out_width()),
          dy(random_values(y.size(), 14)),
          dweight(weight.size()),
          dbias(bias.size()),
          dx(x.size()) {}
};

void im2col_conv_step(const ConvLayer& layer, ConvTensors& t, std::vector<float>& columns) {
    im2col_baseline::conv2d_forward(layer.shape, t.x.data(), t.weight.data(), t.bias.data(), t.y.data(),
                                    columns.data());
    im2col_baseline::conv2d_backward(layer.shape, t.x.data(), t.weight.data(), t.dy.data(), t.dweight.data(), t.dbias.data(),
                         layer.passes_input_gradient ? t.dx.data() : nullptr, columns.data());
}

// oneDNN's primitives on trainhost's own NCHW and OIHW tensors, no copies: what a
// backend that let oneDNN choose nothing would run (oneDNN then takes its GEMM-based
// convolution).
class PlainOneDnnConv {
public:
    PlainOneDnnConv(const ConvLayer& layer, ConvTensors& t)
        : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_), input_gradient_(layer.passes_input_gradient) {
        using tag = dnnl::memory::format_tag;
        using dims = dnnl::memory::dims;
        const cpu::ConvShape& s = layer.shape;
        const auto f32 = dnnl::memory::data_type::f32;
        const dnnl::memory::desc x_md(dims{s.batch, s.channels, s.height, s.width}, f32, tag::nchw),
            w_md(dims{s.filters, s.channels, s.kernel, s.kernel}, f32, tag::oihw), b_md(dims{s.filters}, f32, tag::x),
            y_md(dims{s.batch, s.filters, s.out_height(), s.out_width()}, f32, tag::nchw);
        const dims strides{s.stride, s.stride}, padding{s.padding, s.padding};
        const dnnl::convolution_forward::primitive_desc forward_pd(
            dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                            x_md, w_md, b_md, y_md, strides, padding, padding),
            engine_);
        forward_ = dnnl::convolution_forward(forward_pd);
        backward_weights_ = dnnl::convolution_backward_weights(dnnl::convolution_backward_weights::primitive_desc(
            dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, x_md, w_md, b_md, y_md,
                                                     strides, padding, padding),
            engine_, forward_pd));
        backward_data_ = dnnl::convolution_backward_data(dnnl::convolution_backward_data::primitive_desc(
            dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, x_md, w_md, y_md, strides,
                                                  padding, padding),
            engine_, forward_pd));
        implementations_ = forward_pd.impl_info_str();
        const auto bind = [&](const dnnl::memory::desc& md, std::vector<float>& v) {
            return dnnl::memory(md, engine_, v.data());
        };
        x_ = bind(x_md, t.x), w_ = bind(w_md, t.weight), b_ = bind(b_md, t.bias), y_ = bind(y_md, t.y);
        dy_ = bind(y_md, t.dy), dw_ = bind(w_md, t.dweight), db_ = bind(b_md, t.dbias), dx_ = bind(x_md, t.dx);
    }

    void step() {
        forward_.execute(stream_, {{DNNL_ARG_SRC, x_}, {DNNL_ARG_WEIGHTS, w_}, {DNNL_ARG_BIAS, b_}, {DNNL_ARG_DST, y_}});
        backward_weights_.execute(stream_, {{DNNL_ARG_SRC, x_}, {DNNL_ARG_DIFF_DST, dy_}, {DNNL_ARG_DIFF_WEIGHTS, dw_},
                                            {DNNL_ARG_DIFF_BIAS, db_}});
        if (input_gradient_)
            backward_data_.execute(stream_,
                                   {{DNNL_ARG_DIFF_DST, dy_}, {DNNL_ARG_WEIGHTS, w_}, {DNNL_ARG_DIFF_SRC, dx_}});
        stream_.wait();
    }

    [[nodiscard]] const std::string& implementation() const { return implementations_; }

private:
    dnnl::engine engine_;
    dnnl::stream stream_;
    bool input_gradient_;
    dnnl::convolution_forward forward_;
    dnnl::convolution_backward_weights backward_weights_;
    dnnl::convolution_backward_data backward_data_;
    dnnl::memory x_, w_, b_, y_, dy_, dw_, db_, dx_;
    std::string implementations_;
};

void kernels_conv_step(const cpu::Convolution& conv, ConvTensors& t, std::vector<float>& workspace,
                       bool input_gradient) {
    conv.forward(t.x.data(), t.weight.data(), t.bias.data(), t.y.data(), workspace.data());
    conv.backward(t.x.data(), t.weight.data(), t.dy.data(), t.dweight.data(), t.dbias.data(),
                  input_gradient ? t.dx.data() : nullptr, workspace.data());
}

void conv_im2col(benchmark::State& state, const ConvLayer& layer) {
    ConvTensors t(layer.shape);
    std::vector<float> columns(im2col_baseline::column_size(layer.shape));
    for (auto _ : state) im2col_conv_step(layer, t, columns);
    state.counters["samples/s"] =
        benchmark::Counter(double(layer.shape.batch), benchmark::Counter::kIsIterationInvariantRate);
}

void conv_kernels(benchmark::State& state, const ConvLayer& layer) {
    ConvTensors t(layer.shape);
    const cpu::Convolution conv(layer.shape);
    std::vector<float> workspace(conv.workspace_floats());
    for (auto _ : state) kernels_conv_step(conv, t, workspace, layer.passes_input_gradient);
    state.counters["samples/s"] =
        benchmark::Counter(double(layer.shape.batch), benchmark::Counter::kIsIterationInvariantRate);
}

void conv_plain_onednn(benchmark::State& state, const ConvLayer& layer) {
    ConvTensors t(layer.shape);
    PlainOneDnnConv conv(layer, t);
    for (auto _ : state) conv.step();
    state.SetLabel(conv.implementation());
    state.counters["samples/s"] =
        benchmark::Counter(double(layer.shape.batch), benchmark::Counter::kIsIterationInvariantRate);
}

// One step of `side` on fresh tensors against im2col's on the same data.
template <typename Step>
void check_against_im2col(const ConvLayer& layer, const std::string& side, Step step) {
    ConvTensors ours(layer.shape), theirs(layer.shape);
    std::vector<float> columns(im2col_baseline::column_size(layer.shape));
    im2col_conv_step(layer, ours, columns);
    step(theirs);
    const std::string name = std::string(layer.name) + " " + side;
    require_close(name + " y", theirs.y, ours.y);
    require_close(name + " dW", theirs.dweight, ours.dweight);
    require_close(name + " db", theirs.dbias, ours.dbias);
    if (layer.passes_input_gradient) require_close(name + " dx", theirs.dx, ours.dx);
}

void check_convolutions() {
    for (const ConvLayer& layer : conv_layers()) {
        check_against_im2col(layer, "plain", [&](ConvTensors& t) { PlainOneDnnConv(layer, t).step(); });
        check_against_im2col(layer, "kernels/cpu", [&](ConvTensors& t) {
            const cpu::Convolution conv(layer.shape);
            std::vector<float> workspace(conv.workspace_floats());
            kernels_conv_step(conv, t, workspace, layer.passes_input_gradient);
        });
    }
}

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    check_gemms();
    check_convolutions();
    for (const Workload& w : workloads()) {
        benchmark::RegisterBenchmark((std::string("gemm_step/") + w.name + "/openblas").c_str(),
                                     gemm_step<run_openblas>, w)->UseRealTime();
        benchmark::RegisterBenchmark((std::string("gemm_step/") + w.name + "/onednn").c_str(),
                                     gemm_step<run_onednn>, w)->UseRealTime();
    }
    for (const ConvLayer& layer : conv_layers()) {
        const std::string name = std::string("conv_step/") + layer.name;
        benchmark::RegisterBenchmark((name + "/im2col").c_str(), conv_im2col, layer)->UseRealTime();
        benchmark::RegisterBenchmark((name + "/kernels_cpu").c_str(), conv_kernels, layer)->UseRealTime();
        benchmark::RegisterBenchmark((name + "/onednn_plain").c_str(), conv_plain_onednn, layer)->UseRealTime();
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
}
