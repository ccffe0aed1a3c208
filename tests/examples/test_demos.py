"""Short runs of the demos: they learn, and a run cut off and resumed from its checkpoint
continues the very same loss curve as an uninterrupted one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("tqdm")
pytest.importorskip("matplotlib")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))

import char_lm  # noqa: E402
import digits  # noqa: E402

import ndgrad  # noqa: E402


def _history(out: Path) -> list[float]:
    return ndgrad.load(out / "checkpoint.pt")["history"]


def test_digits_mlp_learns_and_resume_continues_the_same_curve(tmp_path):
    common = ["--model", "mlp", "--epochs", "4", "--no-progress"]
    acc = digits.main(common + ["--out", str(tmp_path / "whole")])
    digits.main(common + ["--out", str(tmp_path / "cut"), "--stop-after", "2"])
    assert len(_history(tmp_path / "cut")) == len(_history(tmp_path / "whole")) // 2
    digits.main(common + ["--out", str(tmp_path / "cut"), "--resume"])
    whole, resumed = _history(tmp_path / "whole"), _history(tmp_path / "cut")
    assert resumed == whole  # bit for bit: model, optimizer, scheduler, RNG and data order restored
    assert acc > 0.9 and sum(whole[-5:]) < sum(whole[:5]) / 4
    assert (tmp_path / "whole" / "loss.png").stat().st_size > 1000


def test_digits_cnn_learns(tmp_path):
    acc = digits.main(["--model", "cnn", "--epochs", "2", "--no-progress", "--out", str(tmp_path)])
    assert acc > 0.85


def test_char_lm_beats_the_unigram_baseline(tmp_path):
    val, baseline = char_lm.main([
        "--chars", "60000", "--width", "48", "--heads", "2", "--layers", "1", "--context", "32",
        "--epochs", "3", "--steps-per-epoch", "60", "--lr", "1e-2", "--no-progress", "--out", str(tmp_path)])
    assert val < 0.85 * baseline
