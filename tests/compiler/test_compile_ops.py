"""Every op-table sample through ``ndgrad.compile(fn, backend=b)`` for the three built-in
backends gives eager's values and gradients (issue 15, "Done when"): capture, guards, the cache
and each backend together, as users call them. The first call captures (its results are the
capturing run's); the checked call is the second, a cache hit that runs the compiled code."""

import pytest

import ndgrad as nd
from ndgrad._dynamo.utils import counters
from test_aot import CASES, check_backend_on_sample



def _writes(rec) -> bool:
    if rec.kind == "composite":
        return rec.name.split(".")[0].endswith("_")
    return rec.kind == "inplace" or rec._schema.is_mutable


OUT_OF_PLACE = [c for c in CASES if not _writes(c.values[0])]


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("rec,sample", OUT_OF_PLACE)
def test_op_through_ndgrad_compile(rec, sample, backend):
    def compiled(fn, args):
        f = nd.compile(fn, backend=backend)
        nd.manual_seed(0)
        f(*args)  # capture and compile (an in-place op would apply twice: those are left out)
        before = (counters["stats"]["cache_hits"], counters["stats"]["eager_runs"])
        return lambda *a: _hit(f, a, before)

    check_backend_on_sample(None, rec, sample, compile_fn=compiled)


def _hit(f, args, before):
    out = f(*args)
    hits, eager = before
    assert (counters["stats"]["cache_hits"], counters["stats"]["eager_runs"]) == (hits + 1, eager), (
        "the checked call did not run the compiled code")
    return out
