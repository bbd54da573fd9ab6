#include "kernels/cpu/conv.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace trainhost::kernels::cpu {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// Copies and scratchpads start on a cache line, as oneDNN's own allocations do.
constexpr std::size_t kAlignmentFloats = 64 / sizeof(float);

std::size_t floats_for(const memory::desc& desc) { return (desc.get_size() + sizeof(float) - 1) / sizeof(float); }

// Lays blocks one after another in a workspace, each on the alignment boundary.
class WorkspacePlan {
public:
    std::size_t place(const memory::desc& desc) {
        const std::size_t offset = end_;
        end_ += (floats_for(desc) + kAlignmentFloats - 1) / kAlignmentFloats * kAlignmentFloats;
        return offset;
    }
    [[nodiscard]] std::size_t end() const noexcept { return end_; }

private:
    std::size_t end_ = 0;
};

float* align_up(float* workspace) {
    const auto address = reinterpret_cast<std::uintptr_t>(workspace);
    const std::uintptr_t boundary = kAlignmentFloats * sizeof(float);
    return reinterpret_cast<float*>((address + boundary - 1) / boundary * boundary);
}

// A tensor as trainhost holds it (NCHW, OIHW) and as a primitive takes it: where the
// two layouts differ, a reorder into (or out of) a copy in the workspace.
class Operand {
public:
    Operand() = default;
    Operand(const dnnl::engine& engine, const memory::desc& plain, const memory::desc& wanted, bool read,
            WorkspacePlan& plan)
        : plain_(plain), wanted_(wanted) {
        if (plain == wanted) return;
        offset_ = plan.place(wanted);
        copy_ = read ? dnnl::reorder(dnnl::reorder::primitive_desc(engine, plain, engine, wanted))
                     : dnnl::reorder(dnnl::reorder::primitive_desc(engine, wanted, engine, plain));
    }

    // What the primitive reads: the tensor itself, or its copy in the primitive's layout.
    memory read(const dnnl::engine& engine, dnnl::stream& stream, const float* data, float* workspace) const {
        memory tensor(plain_, engine, const_cast<float*>(data));
        if (!copy_) return tensor;
        memory copy(wanted_, engine, workspace + offset_);
        copy_.execute(stream, {{DNNL_ARG_FROM, tensor}, {DNNL_ARG_TO, copy}});
        stream.wait();  // before `tensor` goes, whatever the runtime
        return copy;
    }
    // Where the primitive writes: the tensor itself, or a copy that written() brings back.
    [[nodiscard]] memory target(const dnnl::engine& engine, float* data, float* workspace) const {
        return copy_ ? memory(wanted_, engine, workspace + offset_) : memory(plain_, engine, data);
    }
    void written(const dnnl::engine& engine, dnnl::stream& stream, const memory& target, float* data) const {
        if (!copy_) return;
        copy_.execute(stream, {{DNNL_ARG_FROM, target}, {DNNL_ARG_TO, memory(plain_, engine, data)}});
        stream.wait();
    }

private:
    memory::desc plain_, wanted_;
    std::size_t offset_ = 0;  // floats from the aligned workspace start
    dnnl::reorder copy_;      // empty where the layouts agree
};

// A primitive with its scratchpad's place in the workspace.
template <typename Primitive>
struct Pass {
    Primitive primitive;
    memory::desc scratchpad;
    std::size_t scratchpad_offset = 0;

    Pass() = default;
    template <typename PrimitiveDesc>
    Pass(const PrimitiveDesc& pd, WorkspacePlan& plan)
        : primitive(pd), scratchpad(pd.scratchpad_desc()), scratchpad_offset(plan.place(scratchpad)) {}

    void run(const dnnl::engine& engine, dnnl::stream& stream, std::unordered_map<int, memory> arguments,
             float* workspace) const {
        arguments.emplace(DNNL_ARG_SCRATCHPAD, memory(scratchpad, engine, workspace + scratchpad_offset));
        primitive.execute(stream, arguments);
        stream.wait();  // while `arguments` hold their memory objects
    }
};

std::string describe(const ConvShape& s) {
    return std::to_string(s.batch) + "x" + std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" +
           std::to_string(s.width) + " to " + std::to_string(s.filters) + " channels, kernel " +
           std::to_string(s.kernel) + ", stride " + std::to_string(s.stride) + ", padding " + std::to_string(s.padding);
}

}  // namespace

struct Convolution::Primitives {
    dnnl::engine engine{dnnl::engine::kind::cpu, 0};
    mutable dnnl::stream stream{engine};
    memory::desc bias;
    Pass<dnnl::convolution_forward> forward;
    Operand x, weight, y;
    // The backward pass: the weight and bias gradients, then the input gradient.
    Pass<dnnl::convolution_backward_weights> backward_weights;
    Operand x_for_weights, dy_for_weights, dweight;
    Pass<dnnl::convolution_backward_data> backward_data;
    Operand dy_for_data, weight_for_data, dx;
};

Convolution::Convolution(const ConvShape& shape) : shape_(shape), primitives_(std::make_unique<Primitives>()) {
    const ConvShape& s = shape;
    if (s.batch < 1 || s.channels < 1 || s.filters < 1 || s.kernel < 1 || s.stride < 1 || s.padding < 0 ||
        s.out_height() < 1 || s.out_width() < 1)
        throw std::invalid_argument("Convolution: " + describe(s) + " has no output");
    Primitives& p = *primitives_;
    const auto f32 = memory::data_type::f32;
    const memory::dims x_dims{s.batch, s.channels, s.height, s.width},
        w_dims{s.filters, s.channels, s.kernel, s.kernel}, y_dims{s.batch, s.filters, s.out_height(), s.out_width()};
    const memory::dims strides{s.stride, s.stride}, padding{s.padding, s.padding};
    const memory::desc x_plain(x_dims, f32, Tag::nchw), w_plain(w_dims, f32, Tag::oihw),
        y_plain(y_dims, f32, Tag::nchw), x_any(x_dims, f32, Tag::any), w_any(w_dims, f32, Tag::any),
        y_any(y_dims, f32, Tag::any);
    p.bias = memory::desc({s.filters}, f32, Tag::x);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    try {
        const dnnl::convolution_forward::primitive_desc forward_pd(
            dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                            x_any, w_any, p.bias, y_any, strides, padding, padding),
            attr, p.engine);
        const dnnl::convolution_backward_weights::primitive_desc weights_pd(
            dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, x_any, w_any, p.bias, y_any,
                                                     strides, padding, padding),
            attr, p.engine, forward_pd);
        const dnnl::convolution_backward_data::primitive_desc data_pd(
            dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, x_any, w_any, y_any, strides,
                                                  padding, padding),
            attr, p.engine, forward_pd);

        // Each pass lays out its copies and scratchpads from the workspace's start: the
        // passes never run at once.
        WorkspacePlan forward_plan;
        p.x = Operand(p.engine, x_plain, forward_pd.src_desc(), true, forward_plan);
        p.weight = Operand(p.engine, w_plain, forward_pd.weights_desc(), true, forward_plan);
        p.y = Operand(p.engine, y_plain, forward_pd.dst_desc(), false, forward_plan);
        p.forward = Pass<dnnl::convolution_forward>(forward_pd, forward_plan);

        WorkspacePlan backward_plan;
        p.x_for_weights = Operand(p.engine, x_plain, weights_pd.src_desc(), true, backward_plan);
        p.dy_for_weights = Operand(p.engine, y_plain, weights_pd.diff_dst_desc(), true, backward_plan);
        p.dweight = Operand(p.engine, w_plain, weights_pd.diff_weights_desc(), false, backward_plan);
        p.backward_weights = Pass<dnnl::convolution_backward_weights>(weights_pd, backward_plan);
        p.dy_for_data = Operand(p.engine, y_plain, data_pd.diff_dst_desc(), true, backward_plan);
        p.weight_for_data = Operand(p.engine, w_plain, data_pd.weights_desc(), true, backward_plan);
        p.dx = Operand(p.engine, x_plain, data_pd.diff_src_desc(), false, backward_plan);
        p.backward_data = Pass<dnnl::convolution_backward_data>(data_pd, backward_plan);

        // Room to align the start, wherever the caller's workspace begins.
        workspace_floats_ = std::max(forward_plan.end(), backward_plan.end()) + kAlignmentFloats;
    } catch (const dnnl::error& e) {
        throw std::runtime_error("oneDNN cannot run the convolution " + describe(s) + ": " + e.what());
    }
}

Convolution::~Convolution() = default;

namespace {

struct Input {
    int argument;
    const Operand& operand;
    const float* data;
};
struct Output {
    int argument;
    const Operand& operand;
    float* data;
};

// One pass: its two inputs copied into its layouts where it has its own, its output
// brought back to trainhost's, and `as_is` (a bias or its gradient) passed as it is.
template <typename Primitive>
void run(const dnnl::engine& engine, dnnl::stream& stream, const Pass<Primitive>& pass, Input a, Input b, Output out,
         std::unordered_map<int, memory> as_is, float* base) {
    const memory target = out.operand.target(engine, out.data, base);
    as_is.emplace(a.argument, a.operand.read(engine, stream, a.data, base));
    as_is.emplace(b.argument, b.operand.read(engine, stream, b.data, base));
    as_is.emplace(out.argument, target);
    pass.run(engine, stream, std::move(as_is), base);
    out.operand.written(engine, stream, target, out.data);
}

}  // namespace

void Convolution::forward(const float* x, const float* weight, const float* bias, float* y, float* workspace) const try {
    const Primitives& p = *primitives_;
    run(p.engine, p.stream, p.forward, {DNNL_ARG_SRC, p.x, x}, {DNNL_ARG_WEIGHTS, p.weight, weight},
        {DNNL_ARG_DST, p.y, y}, {{DNNL_ARG_BIAS, memory(p.bias, p.engine, const_cast<float*>(bias))}},
        align_up(workspace));
} catch (const dnnl::error& e) {
    throw std::runtime_error("oneDNN failed in the convolution " + describe(shape_) + ", forward: " + e.what());
}

void Convolution::backward(const float* x, const float* weight, const float* dy, float* dweight, float* dbias,
                           float* dx, float* workspace) const try {
    const Primitives& p = *primitives_;
    float* base = align_up(workspace);
    run(p.engine, p.stream, p.backward_weights, {DNNL_ARG_SRC, p.x_for_weights, x},
        {DNNL_ARG_DIFF_DST, p.dy_for_weights, dy}, {DNNL_ARG_DIFF_WEIGHTS, p.dweight, dweight},
        {{DNNL_ARG_DIFF_BIAS, memory(p.bias, p.engine, dbias)}}, base);
    if (dx != nullptr)
        run(p.engine, p.stream, p.backward_data, {DNNL_ARG_DIFF_DST, p.dy_for_data, dy},
            {DNNL_ARG_WEIGHTS, p.weight_for_data, weight}, {DNNL_ARG_DIFF_SRC, p.dx, dx}, {}, base);
} catch (const dnnl::error& e) {
    throw std::runtime_error("oneDNN failed in the convolution " + describe(shape_) + ", backward: " + e.what());
}

// A row of outputs at a time, window offset by window offset: each output's
// comparisons depend on each other, but the outputs of a row do not, so the loop
// over them runs without waiting (about five times faster than output by output).
// The running maxima live in two small vectors per call: kept in the output rows
// instead, which the compiler cannot prove apart from the input, the CNN trained
// about 15% slower.
void max_pool2d_forward(const PoolShape& s, const float* x, float* y, std::int32_t* argmax) {
    const int oh = s.out_height(), ow = s.out_width();
    std::vector<float> best(ow);
    std::vector<std::int32_t> best_index(ow);
    for (int n = 0; n < s.batch; ++n)
        for (int c = 0; c < s.channels; ++c) {
            const std::size_t plane = (static_cast<std::size_t>(n) * s.channels + c);
            const float* in = x + plane * s.height * s.width;
            for (int oy = 0; oy < oh; ++oy) {
                const int top = oy * s.stride * s.width;
                for (int ox = 0; ox < ow; ++ox) {
                    best_index[ox] = top + ox * s.stride;
                    best[ox] = in[best_index[ox]];
                }
                for (int ki = 0; ki < s.kernel; ++ki)
                    for (int kj = 0; kj < s.kernel; ++kj) {
                        const int offset = top + ki * s.width + kj;
                        for (int ox = 0; ox < ow; ++ox) {
                            const int index = offset + ox * s.stride;
                            const float value = in[index];
                            // PyTorch's rule (cpu_max_pool's `val > maxval || isnan(val)`): a
                            // NaN wins against every number, the window's last NaN against an
                            // earlier one, so the gradient goes where PyTorch's does. Ties keep
                            // the first maximum.
                            const bool takes = std::isnan(value) || value > best[ox];
                            best[ox] = takes ? value : best[ox];
                            best_index[ox] = takes ? index : best_index[ox];
                        }
                    }
                const std::size_t out = plane * oh * ow + static_cast<std::size_t>(oy) * ow;
                std::copy(best.begin(), best.end(), y + out);
                if (argmax) std::copy(best_index.begin(), best_index.end(), argmax + out);
            }
        }
}

void max_pool2d_backward(const PoolShape& s, const float* dy, const std::int32_t* argmax, float* dx) {
    const int oh = s.out_height(), ow = s.out_width();
    const std::size_t planes = static_cast<std::size_t>(s.batch) * s.channels;
    std::fill(dx, dx + planes * s.height * s.width, 0.0f);
    for (std::size_t plane = 0; plane < planes; ++plane)
        for (int i = 0; i < oh * ow; ++i) {
            const std::size_t out = plane * oh * ow + i;
            dx[plane * s.height * s.width + argmax[out]] += dy[out];
        }
}

}  // namespace trainhost::kernels::cpu
