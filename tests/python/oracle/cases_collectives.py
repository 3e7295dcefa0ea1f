"""Oracle cases: the data-parallel step's collectives (src/ops/collectives.cpp)
in one process, where the sum over the ranks is the bucket itself: a start
packs its tensors end to end (an all-gather's into this rank's chunk), a
wait unpacks them (a reduce-scatter's, this rank's chunk only). An
all-gather's other chunks come from the other ranks, so its cases give them
none (docs/distributed.md)."""
import torch

from .harness import Case, In, Node, Program, neg_case, op_case

F, D = "float32", "float64"
START, WAIT = "trainstep.all_reduce_start", "trainstep.all_reduce_wait"
RS_START, RS_WAIT = "trainstep.reduce_scatter_start", "trainstep.reduce_scatter_wait"
AG_START, AG_WAIT = "trainstep.all_gather_start", "trainstep.all_gather_wait"
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
        out += _sharded(dt)
    return out + _negatives()


def _sharded(dt):
    """Reduce-scatter and all-gather (a sharded optimizer's), ranks given
    by attrs counts and rank."""
    out = [
        op_case(RS_START, In((3, 4), dt), In((5,), dt), counts=[12, 5], rank=1, overlap=True),
        op_case(RS_START, In((2, 3), dt), counts=[0, 6, 0], rank=2, overlap=False),
        # Chained after another collective (its request, read for order only).
        op_case(RS_START, In((5,), dt), torch.tensor(3), counts=[2, 3], rank=0, after=True),
        op_case(START, In((2, 2), dt), torch.tensor(-1), overlap=True, after=True),
        # This rank's chunk: elements 12..16 of 20 (rank 1 of 3).
        op_case(RS_WAIT, In((20,), dt), torch.tensor(-1), shapes=[[5], []], counts=[12, 6, 2],
                rank=1),
        op_case(RS_WAIT, In((7,), dt), torch.tensor(-1), shapes=[[7]], counts=[7, 0], rank=0),
        # A rank that updates nothing in the bucket: no outputs, still run.
        op_case(AG_START, counts=[0, 0], rank=0, dtype=dt),
        op_case(AG_START, torch.tensor(0), counts=[0, 0], rank=1, dtype=dt, after=True),
        op_case(AG_START, In((2, 2), dt), In((3,), dt), counts=[0, 7], rank=1, overlap=True),
        op_case(AG_START, In((4,), dt), counts=[4, 0, 0], rank=0, overlap=False),
        op_case(AG_WAIT, In((9,), dt), torch.tensor(-1), shapes=[[2, 2], [5]], counts=[4, 5],
                rank=0),
        # Start then wait: rank 1 of 2 owning the whole bucket.
        Case(AG_WAIT, Program(
            {"a": In((3, 2), dt, kind="special"), "b": In((4,), dt)},
            [Node(AG_START, ["a", "b"], {"counts": [0, 10], "rank": 1, "overlap": True,
                                         "dtype": dt}),
             Node(AG_WAIT, ["n0.0", "n0.1"], {"shapes": [[3, 2], [4]], "counts": [0, 10],
                                              "rank": 1})])),
        Case(RS_WAIT, Program(
            {"a": In((3, 2), dt), "b": In((4,), dt, kind="special")},
            [Node(RS_START, ["a", "b"], {"counts": [6, 4], "rank": 1, "overlap": True}),
             Node(RS_WAIT, ["n0.0", "n0.1"], {"shapes": [[2, 2]], "counts": [6, 4],
                                              "rank": 1})])),
    ]
    return out


def _negatives():
    return [
        neg_case(START, In((2,)), In((2,), D), error="a bucket's tensors must share one dtype",
                 unsupported=NO_TORCH),
        neg_case(START, In((2,), "int64", kind="int", lo=0, hi=5),
                 error="its tensors must be float32 or float64", unsupported=NO_TORCH),
        neg_case(WAIT, In((17,)), torch.tensor(-1), shapes=[[3, 4]],
                 error="the shapes hold 12 elements, the bucket 17", unsupported=NO_TORCH),
        neg_case(WAIT, In((3, 4)), torch.tensor(-1), shapes=[[12]],
                 error="the bucket must be 1-d", unsupported=NO_TORCH),
        neg_case(RS_START, In((6,)), counts=[2, 3], rank=0,
                 error="attr 'counts' sums to 5 elements, the bucket holds 6",
                 unsupported=NO_TORCH),
        neg_case(RS_START, In((6,)), counts=[6], rank=0,
                 error="attr 'counts' needs one entry per rank, at least two",
                 unsupported=NO_TORCH),
        neg_case(RS_WAIT, In((6,)), torch.tensor(-1), shapes=[[2]], counts=[3, 3], rank=1,
                 error="the shapes hold 2 elements, this rank's chunk 3", unsupported=NO_TORCH),
        neg_case(AG_START, In((4,)), counts=[4, 4], rank=2, error="attr 'rank' is out of range",
                 unsupported=NO_TORCH),
        neg_case(AG_START, In((4,)), counts=[3, 4], rank=0,
                 error="its inputs hold 4 elements, this rank's chunk 3", unsupported=NO_TORCH),
        neg_case(AG_START, counts=[0, 0], rank=0, error="without inputs, needs attr 'dtype'",
                 unsupported=NO_TORCH),
    ]
