"""``ndgrad.utils.tensorboard.SummaryWriter``: TensorBoard event files, as
``torch.utils.tensorboard`` writes them, through the ``tensorboard`` package (an optional extra:
``pip install ndgrad[tensorboard]``), which owns the file format and its protocol buffers.
"""

from __future__ import annotations

import io
import os
import socket
import struct
import time
import zlib
from datetime import datetime

import numpy as np

__all__ = ["SummaryWriter"]


def _tb():
    try:
        from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2
        from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError as e:
        raise ImportError("TensorBoard logging requires TensorBoard version 1.15 or above: "
                          "pip install tensorboard (or ndgrad[tensorboard])") from e
    return event_pb2, summary_pb2, tensor_pb2, TensorShapeProto, EventFileWriter


def _array(x) -> np.ndarray:
    """A tensor, array, list or number as a NumPy array on the host."""
    from ..._tensor import Tensor
    if isinstance(x, Tensor):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def _scalar(x) -> float:
    a = _array(x)
    if a.size != 1:
        raise AssertionError(f"Tensor should contain one element (0 dimensions). Was given size: "
                             f"{a.size} and {a.ndim} dimensions.")
    return float(a.reshape(()))


def _png(img: np.ndarray) -> bytes:
    """An H x W x C uint8 image (C in 1, 3, 4) as PNG bytes (no filter, zlib-compressed)."""
    h, w, c = img.shape
    color = {1: 0, 3: 2, 4: 6}[c]

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    raw = b"".join(b"\x00" + img[row].tobytes() for row in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def _to_hwc(a: np.ndarray, dataformats: str) -> np.ndarray:
    """One image in ``dataformats`` (CHW, HWC, HW, ...) as H x W x C, scaled to uint8 the way
    PyTorch does: floats are taken in [0, 1] and multiplied by 255."""
    fmt = dataformats.upper()
    if len(fmt) != a.ndim:
        raise AssertionError(f"size of input tensor and input format are different. "
                             f"tensor shape: {a.shape}, input_format: {dataformats}")
    if "C" not in fmt:
        a, fmt = a[..., None], fmt + "C"
    a = np.transpose(a, [fmt.index(k) for k in "HWC"])
    if a.shape[2] == 1:
        pass
    elif a.shape[2] not in (3, 4):
        raise ValueError(f"image must have 1, 3 or 4 channels, got {a.shape[2]}")
    if a.dtype != np.uint8:
        scale = 1 if a.size and np.abs(a).max() > 1 else 255
        a = np.clip(a * scale, 0, 255).astype(np.uint8)
    return a


def _tf_bins() -> np.ndarray:
    """TensorFlow's default histogram buckets: +-1e-12 growing by 10% up to 1e20, and 0."""
    v, pos = 1e-12, []
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    pos = np.array(pos)
    return np.concatenate([-pos[::-1], [0.0], pos])


class _FileWriter:
    def __init__(self, log_dir, max_queue, flush_secs, filename_suffix):
        event_pb2 = _tb()[0]
        self._event_pb2 = event_pb2
        self.writer = _tb()[4](log_dir, max_queue, flush_secs, filename_suffix)

    def add_summary(self, summary, step, walltime) -> None:
        event = self._event_pb2.Event(summary=summary,
                                      wall_time=time.time() if walltime is None else walltime)
        if step is not None:
            event.step = int(step)
        self.writer.add_event(event)

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class SummaryWriter:
    """Writes scalars, histograms, images, text and hyper-parameters for TensorBoard."""

    def __init__(self, log_dir=None, comment: str = "", purge_step=None, max_queue: int = 10,
                 flush_secs: int = 120, filename_suffix: str = "") -> None:
        _tb()
        if not log_dir:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", stamp + "_" + socket.gethostname() + comment)
        self.log_dir = str(log_dir)
        self.purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        self.file_writer = None
        self.all_writers = {}
        self._get_file_writer()

    def _get_file_writer(self) -> _FileWriter:
        if self.file_writer is None:
            self.file_writer = _FileWriter(self.log_dir, self.max_queue, self.flush_secs,
                                           self.filename_suffix)
            self.all_writers = {self.log_dir: self.file_writer}
        return self.file_writer

    def get_logdir(self) -> str:
        return self.log_dir

    def _value(self, tag, **fields):
        summary_pb2 = _tb()[1]
        return summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, **fields)])

    def _write(self, summary, global_step, walltime) -> None:
        self._get_file_writer().add_summary(summary, global_step, walltime)

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False) -> None:
        value = _scalar(scalar_value)
        if not new_style:
            self._write(self._value(tag, simple_value=value), global_step, walltime)
            return
        _, summary_pb2, tensor_pb2, shape, _ = _tb()
        meta = summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
        tensor = tensor_pb2.TensorProto(
            dtype="DT_DOUBLE" if double_precision else "DT_FLOAT",
            double_val=[value] if double_precision else [], float_val=[] if double_precision
            else [value], tensor_shape=shape())
        self._write(self._value(tag, tensor=tensor, metadata=meta), global_step, walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None) -> None:
        """One run per key, ``<log_dir>/<main_tag>_<key>``, each logging ``main_tag``."""
        walltime = time.time() if walltime is None else walltime
        for tag, value in tag_scalar_dict.items():
            path = os.path.join(self.log_dir, main_tag.replace("/", "_") + "_" + tag)
            writer = self.all_writers.get(path)
            if writer is None:
                writer = self.all_writers[path] = _FileWriter(
                    path, self.max_queue, self.flush_secs, self.filename_suffix)
            writer.add_summary(self._value(main_tag, simple_value=_scalar(value)), global_step,
                               walltime)

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None,
                      max_bins=None) -> None:
        summary_pb2 = _tb()[1]
        a = _array(values).astype(np.float64).ravel()
        if a.size == 0:
            raise ValueError("The input has no element.")
        edges = _tf_bins() if bins == "tensorflow" else bins
        counts, limits = np.histogram(a, bins=edges)
        if max_bins is not None and len(counts) > max_bins:
            group = -(-len(counts) // max_bins)
            pad = (-len(counts)) % group
            counts = np.pad(counts, (0, pad)).reshape(-1, group).sum(1)
            limits = np.concatenate([limits[:-1:group], limits[-1:]])
        nonzero = np.nonzero(counts)[0]
        first, last = (nonzero[0], nonzero[-1] + 1) if nonzero.size else (0, 0)
        counts, limits = counts[first:last], limits[first + 1:last + 1]
        hist = summary_pb2.HistogramProto(
            min=float(a.min()), max=float(a.max()), num=int(a.size), sum=float(a.sum()),
            sum_squares=float((a * a).sum()), bucket_limit=limits.tolist(),
            bucket=counts.astype(float).tolist())
        self._write(self._value(tag, histo=hist), global_step, walltime)

    def add_image(self, tag, img_tensor, global_step=None, walltime=None,
                  dataformats="CHW") -> None:
        summary_pb2 = _tb()[1]
        img = _to_hwc(_array(img_tensor), dataformats)
        h, w, c = img.shape
        image = summary_pb2.Summary.Image(height=h, width=w, colorspace=c,
                                          encoded_image_string=_png(img))
        self._write(self._value(tag, image=image), global_step, walltime)

    def add_images(self, tag, img_tensor, global_step=None, walltime=None,
                   dataformats="NCHW") -> None:
        """A batch of images tiled into one grid, as PyTorch's ``make_grid``-like layout."""
        a = _array(img_tensor)
        fmt = dataformats.upper()
        batch = np.moveaxis(a, fmt.index("N"), 0)
        rest = fmt.replace("N", "")
        tiles = [_to_hwc(b, rest) for b in batch]
        n = len(tiles)
        cols = int(np.ceil(np.sqrt(n)))
        rows = -(-n // cols)
        h, w, c = tiles[0].shape
        grid = np.zeros((rows * h, cols * w, c), np.uint8)
        for i, t in enumerate(tiles):
            r, q = divmod(i, cols)
            grid[r * h:(r + 1) * h, q * w:(q + 1) * w] = t
        self.add_image(tag, grid, global_step, walltime, dataformats="HWC")

    def add_figure(self, tag, figure, global_step=None, close: bool = True,
                   walltime=None) -> None:
        figures = figure if isinstance(figure, list) else [figure]
        images = []
        for fig in figures:
            buf = io.BytesIO()
            fig.canvas.draw()
            images.append(np.asarray(fig.canvas.buffer_rgba())[..., :3].copy())
            buf.close()
            if close:
                import matplotlib.pyplot as plt
                plt.close(fig)
        if isinstance(figure, list):
            self.add_images(tag, np.stack(images), global_step, walltime, dataformats="NHWC")
        else:
            self.add_image(tag, images[0], global_step, walltime, dataformats="HWC")

    def add_text(self, tag, text_string, global_step=None, walltime=None) -> None:
        _, summary_pb2, tensor_pb2, shape, _ = _tb()
        meta = summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text",
                                                               content=b""))
        tensor = tensor_pb2.TensorProto(
            dtype="DT_STRING", string_val=[text_string.encode("utf-8")],
            tensor_shape=shape(dim=[shape.Dim(size=1)]))
        self._write(self._value(tag + "/text_summary", metadata=meta, tensor=tensor),
                    global_step, walltime)

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None,
                    global_step=None) -> None:
        """Hyper-parameters and their metrics, in a sub-run, for TensorBoard's HParams tab."""
        if not isinstance(hparam_dict, dict) or not isinstance(metric_dict, dict):
            raise TypeError("hparam_dict and metric_dict should be dictionary.")
        from google.protobuf import struct_pb2
        from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2
        summary_pb2 = _tb()[1]

        def plugin(data):
            content = plugin_data_pb2.HParamsPluginData(version=0, **data).SerializeToString()
            return summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(
                plugin_name="hparams", content=content))

        info = plugin_data_pb2.SessionStartInfo()
        for k, v in hparam_dict.items():
            if isinstance(v, bool):
                info.hparams[k].bool_value = v
            elif isinstance(v, (int, float)):
                info.hparams[k].number_value = float(v)
            elif isinstance(v, str):
                info.hparams[k].string_value = v
            elif v is None:
                info.hparams[k].CopyFrom(struct_pb2.Value(null_value=struct_pb2.NULL_VALUE))
            else:
                info.hparams[k].number_value = _scalar(v)
        experiment = api_pb2.Experiment(
            hparam_infos=[api_pb2.HParamInfo(name=k) for k in hparam_dict],
            metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=k))
                          for k in metric_dict])
        end = plugin_data_pb2.SessionEndInfo(status=api_pb2.Status.Value("STATUS_SUCCESS"))
        run = run_name or str(time.time())
        path = os.path.join(self.log_dir, run)
        with SummaryWriter(log_dir=path) as w:
            for tag, meta in (("_hparams_/experiment", plugin({"experiment": experiment})),
                              ("_hparams_/session_start_info",
                               plugin({"session_start_info": info})),
                              ("_hparams_/session_end_info", plugin({"session_end_info": end}))):
                w._write(self._value(tag, metadata=meta), None, None)
            for k, v in metric_dict.items():
                w.add_scalar(k, v, global_step)

    def add_graph(self, model, input_to_model=None, verbose=False, use_strict_trace=True):
        raise NotImplementedError("SummaryWriter.add_graph needs PyTorch's JIT tracer, which "
                                  "ndgrad does not have; use ndgrad.compiler.capture to inspect "
                                  "a model's graph")

    def flush(self) -> None:
        for w in self.all_writers.values():
            w.flush()

    def close(self) -> None:
        for w in self.all_writers.values():
            w.flush()
            w.close()
        self.file_writer = None
        self.all_writers = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
