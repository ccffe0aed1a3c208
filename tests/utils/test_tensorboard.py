"""SummaryWriter against PyTorch's: what TensorBoard reads back from both runs is the same."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import ndgrad as nd
from ndgrad.utils.tensorboard import SummaryWriter


def _log(lib, writer_cls, path):
    img = np.linspace(0, 1, 3 * 4 * 5).reshape(3, 4, 5).astype(np.float32)
    with writer_cls(str(path)) as w:
        for step in range(3):
            w.add_scalar("loss", lib.tensor(1.0 / (step + 1)), step)
        w.add_scalar("acc", 0.75, 7)
        w.add_scalars("grp", {"a": 1.0, "b": 2.0}, 3)
        w.add_histogram("h", lib.arange(100.0) / 10 - 3, 1)
        w.add_image("img", lib.tensor(img), 2)
        w.add_text("note", "hello world", 1)
        w.add_hparams({"lr": 0.1, "opt": "sgd"}, {"hparam/acc": 0.9}, run_name="hp")
    return path


def _read(path):
    ea = EventAccumulator(str(path), size_guidance={"tensors": 0})
    ea.Reload()
    return ea


def test_what_tensorboard_reads_matches_pytorch(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.utils.tensorboard import SummaryWriter as TorchWriter
    ours = _read(_log(nd, SummaryWriter, tmp_path / "ours"))
    theirs = _read(_log(torch, TorchWriter, tmp_path / "theirs"))
    tags_o, tags_t = ours.Tags(), theirs.Tags()
    for kind in ("scalars", "histograms", "images", "tensors"):
        assert sorted(tags_o[kind]) == sorted(tags_t[kind]), kind
    for tag in tags_t["scalars"]:
        assert [(e.step, e.value) for e in ours.Scalars(tag)] == \
            [(e.step, e.value) for e in theirs.Scalars(tag)]
    ho, ht = ours.Histograms("h")[0].histogram_value, theirs.Histograms("h")[0].histogram_value
    for field in ("min", "max", "num", "sum", "sum_squares"):
        assert getattr(ho, field) == pytest.approx(getattr(ht, field)), field
    io_, it = ours.Images("img")[0], theirs.Images("img")[0]
    assert (io_.width, io_.height, io_.step) == (it.width, it.height, it.step)
    to, tt = ours.Tensors("note/text_summary")[0], theirs.Tensors("note/text_summary")[0]
    assert to.tensor_proto.string_val == tt.tensor_proto.string_val
    for sub in ("grp_a", "grp_b", "hp"):
        assert (tmp_path / "ours" / sub).is_dir()
    a = _read(tmp_path / "ours" / "grp_a")
    assert [(e.step, e.value) for e in a.Scalars("grp")] == [(3, 1.0)]


def test_png_decodes_to_the_image(tmp_path):
    pil = pytest.importorskip("PIL.Image")
    import io
    img = (np.arange(4 * 5 * 3) % 256).astype(np.uint8).reshape(4, 5, 3)
    with SummaryWriter(str(tmp_path)) as w:
        w.add_image("x", img, 0, dataformats="HWC")
    png = _read(tmp_path).Images("x")[0].encoded_image_string
    np.testing.assert_array_equal(np.asarray(pil.open(io.BytesIO(png))), img)


def test_scalar_must_have_one_element(tmp_path):
    with SummaryWriter(str(tmp_path)) as w, pytest.raises(AssertionError, match="one element"):
        w.add_scalar("x", nd.ones(2))
