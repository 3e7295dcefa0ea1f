// The op interface. Each op lives in one place (a file under src/ops/) that
// holds its schema, validation, shape/dtype inference and kernel, and
// registers one OpDef in the registry. The registry is the single source of
// truth for the supported-op list (`trainstep ops --json`, docs/ops.md, the
// exporter's check).
//
// Lifecycle: `infer` runs when a program is verified (types only, no data);
// `make` runs once at compile time and may precompute anything (oneDNN
// primitives, broadcast strides, scratch); Kernel::run runs every step and
// must not allocate.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "trainstep/error.h"
#include "trainstep/tensor.h"

namespace ts {

using json = nlohmann::json;

// What an op sees of its node: name, op, attributes and input types. Attribute
// readers and fail() produce errors that name the node and op.
class NodeCtx {
 public:
  NodeCtx(std::string node, std::string op, const json& attrs, std::vector<TensorType> inputs,
          std::vector<bool> present)
      : node_(std::move(node)), op_(std::move(op)), attrs_(attrs), inputs_(std::move(inputs)),
        present_(std::move(present)) {}

  const std::string& node() const { return node_; }
  const std::string& op() const { return op_; }
  const json& attrs() const { return attrs_; }

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  // Optional tensor inputs (e.g. a conv without bias) are absent, not typed.
  bool has_input(int i) const { return i < num_inputs() && present_[i]; }
  const TensorType& input(int i) const;  // fails if absent

  bool has_attr(const std::string& k) const;  // present and not null
  int64_t attr_int(const std::string& k) const;
  double attr_float(const std::string& k) const;  // accepts ints too
  bool attr_bool(const std::string& k) const;
  std::vector<int64_t> attr_ints(const std::string& k) const;
  std::vector<bool> attr_bools(const std::string& k) const;
  // A 2-value int list (kernel sizes, strides); one value means both. An
  // empty list leaves a and b as they are when empty_ok.
  void attr_pair(const std::string& k, int64_t& a, int64_t& b, bool empty_ok = false) const;
  std::string attr_str(const std::string& k) const;
  std::optional<DType> attr_dtype(const std::string& k) const;  // null -> nullopt

  // Throws ts::Error "node 'NAME' (OP): MSG".
  [[noreturn]] void fail(const std::string& msg) const;
  void expect_inputs(int n) const;  // exact count of inputs
  void expect_dtype(int i, DType t) const;

 private:
  const json& attr(const std::string& k) const;
  std::string node_, op_;
  const json& attrs_;
  std::vector<TensorType> inputs_;
  std::vector<bool> present_;
};

// Compile-time context for building a kernel: the node plus its inferred
// output types (an output may be unused; see Kernel::run).
class Collective;  // trainstep/collective.h

struct KernelCtx {
  const NodeCtx& node;
  const std::vector<TensorType>& outputs;
  int threads;
  // The ranks a data-parallel step reduces over (the all-reduce ops); null
  // in a single-process step.
  Collective* collective = nullptr;
};

// Time kernels spend converting layouts (oneDNN reorders), accumulated only
// while the executor profiles, so `bench --profile` can report it apart from
// compute. Per thread: kernels are called from the executor's thread.
// Functions, not static thread_local members: GCC's UBSan reads a member
// defined in another file through its TLS wrapper as a null load.
struct LayoutTimer {
  static bool& on();
  static double& seconds();
};

struct KernelChoice;  // ops/kernel_choice.h

class Kernel {
 public:
  virtual ~Kernel() = default;
  // in[i].data is nullptr for an absent optional input; out[j].data is
  // nullptr for an output nobody reads (the kernel may skip it).
  virtual void run(const Tensor* in, Tensor* out) = 0;
  // The implementations picked by measurement when it was built, if any.
  virtual std::vector<const KernelChoice*> choices() const { return {}; }
};

// The float32 tile form of a pointwise op, run by the fused elementwise
// kernel on cache-sized tiles: in[k] and out point at n floats (bool values
// travel as 0.0f / 1.0f). Built once at compile time from the node.
class TileOp {
 public:
  virtual ~TileOp() = default;
  virtual void run(const float* const* in, float* out, int64_t n) const = 0;
};

// One of a node's ports: input `index`, or output `index`.
struct PortRef {
  bool output = false;
  int index = 0;
};
inline PortRef in_port(int i) { return {false, i}; }
inline PortRef out_port(int j) { return {true, j}; }

// What an op's kernel does with oneDNN's channel-blocked activations
// (ops/layout.h), for the plan_layouts pass: the ports it reads or writes
// blocked itself, and the ports that must share one layout (a kernel that
// takes one layout for all of them, or applies a mask element by element).
struct LayoutCaps {
  std::vector<PortRef> blocked;
  std::vector<std::vector<PortRef>> same;
  // Set when only some nodes of the op qualify (by their attrs).
  bool (*applies)(const json& attrs) = nullptr;
  // Its kernels also take bfloat16 values channels-last (nhwc) on those
  // ports; float32 values are blocked (nChw8c / nChw16c).
  bool channels_last = false;
  // The ports from these indices on (the variable tails where a fused node
  // carries its pointwise group's inputs and outputs) are blocked too, and
  // belong to same[0]; -1: none. One-element values there take no layout.
  int blocked_inputs_from = -1;
  int blocked_outputs_from = -1;
};

enum class CommRole { None, Start, Wait };

// A tensor as a strided view of some buffer: element i sits at
// offset + sum(i_j * stride_j) of it.
struct StridedView {
  Shape size;
  std::vector<int64_t> stride;
  int64_t offset = 0;
};
// Shape s laid out contiguously, from offset 0.
StridedView contiguous_view(const Shape& s);
// Whether v is laid out as a contiguous tensor of its size (from any offset).
bool is_contiguous(const StridedView& v);

// Algebraic facts the simplify pass rewrites by; each rule keeps the type.
struct Algebra {
  // Input 0 reshaped to a shape its attrs alone give (view, reshape): it may
  // read the buffer under any chain of aliasing ops directly.
  bool reshape_like = false;
  // op(op(x)) == x (t, neg).
  bool involution = false;
  // Input 0 converted to the output's dtype (_to_copy): input 0 itself
  // when the types already match.
  bool value_cast = false;
  // op(x, e) == x for e = identity, the value of input 1 (a 0-d constant)
  // or, when identity_attr names one, of that attr (the .Scalar ops).
  std::optional<double> identity = std::nullopt;
  const char* identity_attr = nullptr;
  bool commutes = false;  // op(e, x) == x as well
  // The other operand is scaled by this attr (add/sub's alpha): the
  // identity holds only when it is absent, null or 1.
  const char* scale_attr = nullptr;
};

// Compile-time values. Literal: output 0 is attr `value` cast to attr
// `dtype` (trainstep.constant, the form fold_constants gives every folded
// value). Immediate: a 0-d value made from attrs alone, which a fused
// elementwise kernel evaluates once at compile time. Literal is one too.
enum class ConstRole { None, Immediate, Literal };

// The part an op plays in a fusion pass's pattern, so the passes ask the
// op rather than match names. Each role is one op's.
enum class FuseRole {
  None,
  Relu,             // relu(x)
  LeScalar,         // x <= attr other: relu's backward is where(x <= 0, 0, g)
  Where,            // where(c, a, b)
  Conv,             // convolution: with the relu reading it, becomes relu_fused
  ConvBackward,     // its grad_input masked by relu's backward: relu_fused
  MaxPool,          // the forward of a MaxPoolBackward: becomes relu_fused
  MaxPoolBackward,  // the where masking its result becomes relu_fused
  BatchNorm,        // batch norm: with the relu reading output 0, becomes relu_fused;
                    // with the pointwise groups reading it, group_fused
  BatchNormBackward,  // batch norm's backward: with a group making grad_out, group_fused
  ElementwiseGroup,   // a fused elementwise group (attrs members, outputs)
  Transpose,        // t(x) of a 2-d x
  Permute,          // x's dims reordered by attr dims
  MatMul,           // a @ b
  MatMulT,          // op(a) @ op(b), op by attrs trans_a / trans_b
  AddMm,            // beta * self + alpha * (mat1 @ mat2)
  AddMmT,           // AddMm of op(mat1), op(mat2), op by attrs trans_a / trans_b
  Add,              // self + alpha * other (a sum of products may merge)
  BatchMatMul,      // a @ b of rank-3 a, b (batched)
  SwapDims,         // x with dims attr dim0 and dim1 swapped
};

// The scalar function a pointwise op computes, for backends that build
// pointwise programs of their own (src/cuda): they take it from the op, so
// none keeps a second table of op names.
enum class PwCode : uint8_t {
  None,
  Add, Sub, Mul, Div, Max, Min, Pow,  // self op other (Add, Sub: other scaled by attr alpha)
  PowScalar,                          // self ** attr exponent
  Eq, Ne, Lt, Le, Gt, Ge,             // -> bool, compared in the promoted dtype
  Where,                              // condition ? self : other
  MaskedFill,                         // inputs self, mask: mask ? attr value : self
  Neg, Exp, Expm1, Log, Log1p, Sqrt, Rsqrt, Abs, Relu, Sigmoid, Tanh, Cos, Sin, Reciprocal,
  Sign, Erf,
  Gelu,   // attr approximate: "tanh" or none
  Cast,   // self converted to the output's dtype
  Clamp,  // bounded by attrs min and/or max
};
struct Pointwise {
  PwCode code = PwCode::None;
  // The .Scalar forms: the attr that is the last operand.
  const char* scalar_attr = nullptr;
};

// How an op's kernel takes bfloat16 values (docs/bf16.md).
enum class Bf16 : uint8_t {
  // The float32 kernel of the same node with every bfloat16 input, output
  // and dtype attr made float32, between conversions: torch computes
  // bfloat16 ops in float32 and rounds once, and so does this (make_kernel).
  ViaFloat32,
  // The kernel takes bfloat16 itself: it moves bytes, casts, or has a
  // bfloat16 form (oneDNN).
  Native,
  // Refused at verification: float32 arithmetic would not give torch's
  // bfloat16 result.
  No,
};

struct OpDef {
  std::string name;  // exporter's name, e.g. "aten.convolution.default"
  std::string doc;   // one line for docs/ops.md
  std::vector<TensorType> (*infer)(const NodeCtx&) = nullptr;
  std::unique_ptr<Kernel> (*make)(const KernelCtx&) = nullptr;
  // Output 0 aliases input 0's memory (contiguous reshape: view, squeeze,
  // unsqueeze). The executor then binds no buffer and runs no kernel.
  bool alias_input0 = false;
  // Pointwise ops give their tile form here (nullptr: not fusable).
  std::unique_ptr<TileOp> (*make_tile)(const NodeCtx&) = nullptr;
  // out[j][i] depends only on element i of each input (or on 0-d inputs),
  // and the kernel reads element i before writing it: an output may share
  // the buffer of a same-typed input that dies here (in-place update).
  bool same_index = false;
  // Output 0 may take the buffer of this input when the input dies at this
  // node and has the same byte size: the kernel has read all it needs of
  // that input before it writes output 0. -1: none.
  int overwrites_input = -1;
  // The kernel only moves or converts data (transposes, concatenation,
  // casts): profiles count it as overhead, not compute.
  bool data_movement = false;
  // Blocked-layout ports (plan_layouts); absent: the kernel takes plain
  // layouts only (pointwise ops take any layout through same_index).
  std::optional<LayoutCaps> layouts = std::nullopt;
  // Relu's backward, where(x <= 0, 0, g), can fold into this op's gradient
  // for this node, whose relu output is x (fuse_relu_backward). nullptr:
  // never. For max pooling it is asked of the forward node, whose form
  // changes too.
  bool (*relu_backward_fusable)(const NodeCtx& node, const TensorType& x) = nullptr;
  // Communication: a Start node hands work to another thread and returns;
  // its Wait node blocks until that work is done. The schedule runs a Start
  // as soon as its operands exist and never pulls a Wait earlier than its
  // place, so the work overlaps what runs between them.
  CommRole comm = CommRole::None;
  Algebra algebra = {};
  // Draws fresh random numbers: two nodes with equal inputs and attrs
  // differ, and none is known at compile time (cse, fold_constants).
  bool random = false;
  // Reads only its inputs' shapes and dtypes, never their data (new_full,
  // zeros_like): fold_constants evaluates it on placeholder inputs.
  bool shape_only = false;
  ConstRole constant = ConstRole::None;
  FuseRole fuse_role = FuseRole::None;
  // The op a node of role Conv, ConvBackward, MaxPool, MaxPoolBackward or
  // BatchNorm becomes in its relu fusion (for MaxPoolBackward: the where masking it).
  const char* relu_fused = nullptr;
  // The op a BatchNorm or BatchNormBackward node becomes when it takes in
  // the pointwise groups that read its output 0 or make its grad_out
  // (fuse_batch_norm_groups).
  const char* group_fused = nullptr;
  // Output 0 is input 0's elements read as a strided view (transpose,
  // expand, as_strided, clone; the aliasing reshapes too): given input 0 as
  // a view of some buffer, output 0 (shape `out`) as a view of the same
  // buffer, or nullopt where strides cannot express it (a reshape of a
  // transposed view). The compose_views pass makes a chain of such copies
  // one as_strided.
  std::optional<StridedView> (*strided_view)(const NodeCtx& node, const StridedView& in,
                                             const Shape& out) = nullptr;
  // What a pointwise op computes element by element (None: not pointwise,
  // or clone, which backends run as a copy).
  Pointwise pointwise = {};
  Bf16 bf16 = Bf16::ViaFloat32;
};

// Builds a node's kernel: def.make, or for a bfloat16 node of a ViaFloat32
// op, def.make of its float32 twin between conversions. Every caller that
// runs kernels builds them here.
std::unique_ptr<Kernel> make_kernel(const OpDef& def, const KernelCtx& ctx);

class OpRegistry {
 public:
  static const OpRegistry& get();  // all ops, built once
  const OpDef* find(const std::string& name) const;
  const std::vector<OpDef>& all() const { return ops_; }
  void add(OpDef def);  // fails on a duplicate name

 private:
  std::vector<OpDef> ops_;
};

// Helper for kernels defined as a lambda-free function pointer.
template <class F>
class FnKernel : public Kernel {
 public:
  explicit FnKernel(F f) : f_(std::move(f)) {}
  void run(const Tensor* in, Tensor* out) override { f_(in, out); }

 private:
  F f_;
};
template <class F>
std::unique_ptr<Kernel> make_fn_kernel(F f) {
  return std::make_unique<FnKernel<F>>(std::move(f));
}

}  // namespace ts
