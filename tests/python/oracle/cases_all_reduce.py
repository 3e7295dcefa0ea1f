"""Oracle cases: the data-parallel step's all-reduce ops
(src/ops/all_reduce.cpp), in one process, where the sum over the ranks is
the bucket itself: start packs its gradients end to end, wait unpacks them
(docs/distributed.md)."""
import torch

from .harness import Case, In, Node, Program, neg_case, op_case

F, D = "float32", "float64"
START, WAIT = "trainstep.all_reduce_start", "trainstep.all_reduce_wait"
NO_TORCH = "no torch op: the data-parallel pass makes these nodes"


def cases():
    out = []
    for dt in (F, D):
        out.append(op_case(START, In((3, 4), dt), In((5,), dt), In((), dt), overlap=True))
        out.append(op_case(START, In((2, 0), dt), In((129, 257), dt), overlap=False))
        out.append(op_case(WAIT, In((17,), dt), torch.tensor(-1), shapes=[[3, 4], [5]]))
        out.append(op_case(WAIT, In((3,), dt), torch.tensor(-1), shapes=[[0], [1, 2], []]))
        # Start then wait: the gradients come back as they went in.
        out.append(Case(WAIT, Program(
            {"a": In((3, 4), dt, kind="special"), "b": In((7, 1, 2), dt)},
            [Node(START, ["a", "b"], {"overlap": True}),
             Node(WAIT, ["n0.0", "n0.1"], {"shapes": [[3, 4], [7, 1, 2]]})])))
    return out + _negatives()


def _negatives():
    return [
        neg_case(START, In((2,)), In((2,), D), error="a bucket's gradients must share one dtype",
                 unsupported=NO_TORCH),
        neg_case(START, In((2,), "int64", kind="int", lo=0, hi=5),
                 error="gradients must be float32 or float64", unsupported=NO_TORCH),
        neg_case(WAIT, In((17,)), torch.tensor(-1), shapes=[[3, 4]],
                 error="the shapes hold 12 elements, the bucket 17", unsupported=NO_TORCH),
        neg_case(WAIT, In((3, 4)), torch.tensor(-1), shapes=[[12]],
                 error="the bucket must be 1-d", unsupported=NO_TORCH),
    ]
