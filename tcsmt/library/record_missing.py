"""Record on the spot the plan of a call no plan catalog holds, on the GPU the call's tensors live on.

The torch facade (:mod:`tcsmt.torch`, ``record=FOLDER`` or ``$TCSMT_RECORD``) asks :func:`answer_for` (through
:func:`tcsmt.library.api.explain`), which calls :func:`record_missing` where the catalogs usable under the running GPU's
stamp hold no run covering a call.  The call is recorded as ``tcsmt
record --call`` records it (:func:`tcsmt.hwcheck.record.record_calls`: CUDA graph capture, so nothing executes,
under the call's settings key, torch's own settings restored afterwards), merged into the folder's on-the-spot
recording of that settings key (:func:`tcsmt.library.record_store.merge_recordings`), and the folder's on-the-spot
catalog (``<gpu>_cublas<version>_torch<version>_on_the_spot.sqlite``) is built again from its recordings by the
shipped rules (:func:`tcsmt.library.catalog_build.build_catalog`).  The recorded plan then answers like any
recorded one, or is refused with its reason (an unread K order, an unknown slice rule): what the GPU ran is read,
never guessed, and the conversion is the catalogs' own.  A rebuild converts every call on file again (about
0.5 ms a call): the folder suits the distinct shapes of a program; record long lists with ``tcsmt record --calls``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from tcsmt.errors import InternalError, TcsmtError
from tcsmt.library.lookup import Answer, Target, answer, recorded, user_dirs
from tcsmt.library.plans import Call
from tcsmt.library.record_store import (
    catalog_name,
    merge_recordings,
    recorder_call,
    recording_path,
    setting_for,
    write_recording,
)

SPOT_NAME = "on_the_spot"
"""The last part of the on-the-spot catalog's file name (:func:`tcsmt.library.record_store.catalog_name`)."""


def record_missing(torch: Any, call: Call, gpu: str, folder: Path, device_index: int) -> Path:
    """Record ``call`` on CUDA device ``device_index`` into ``folder`` (made where missing) and rebuild the folder's
    on-the-spot catalog of ``gpu``; its path.  TcsmtError where the call's settings key needs environment variables
    this process lacks, or the recording cannot be made or written."""
    from tcsmt.hwcheck.record import record_calls
    from tcsmt.hwcheck.stamp import running_stamp
    from tcsmt.library.catalog_build import build_catalog, read_recording, setting_of

    setting = setting_for(call.settings)  # refuses before any GPU work
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise TcsmtError(f"record folder {folder} is not a folder")
    with torch.cuda.device(device_index):
        stamp = running_stamp(torch, device_index)
        rec = record_calls(torch, [recorder_call(call)], setting, name=SPOT_NAME)
    if rec.get("interrupted"):
        raise KeyboardInterrupt
    if setting_of(rec, call.a_dtype) != call.settings:
        raise InternalError(f"recorded {call.label()} under settings {setting_of(rec, call.a_dtype)!r}, "
                            f"not {call.settings!r}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TcsmtError(f"cannot make record folder {folder}: {exc}") from None
    catalog = folder / catalog_name(gpu, stamp, SPOT_NAME)
    path = recording_path(catalog, call.settings)
    if path.exists():
        rec = merge_recordings(read_recording(path), rec)
    write_recording(path, rec)
    recs = [(p.name, read_recording(p)) for p in sorted(folder.glob(catalog.stem + ".*.json.gz"))]
    build_catalog(recs, catalog, gpu=gpu)
    return catalog


def answer_for(call: Call, target: Target) -> Answer:
    """:func:`answer` for ``call`` on ``target``.  Where ``target.record`` names a folder, it is searched too, and
    where no catalog usable under the running stamp holds a run covering the call, the call is first recorded on
    the spot on the target's CUDA device (:func:`record_missing`) into that folder."""
    if target.record is None:
        return answer(call, target.gpu, plans_dirs=target.plans_dirs, stamp=target.stamp)
    folder = Path(target.record)
    others = tuple(str(d) for d in user_dirs(target.plans_dirs) if not (folder.is_dir() and d.resolve() == folder.resolve()))
    dirs = (*others, str(folder)) if folder.is_dir() else others
    try:
        return answer(call, target.gpu, plans_dirs=dirs, stamp=target.stamp)
    except TcsmtError:
        if recorded(call, target.gpu, plans_dirs=dirs, stamp=target.stamp):
            raise
    if target.stamp is None or target.device_index is None:
        raise TcsmtError("recording on the spot needs the running GPU (the torch facade's CUDA tensors with "
                         "gpu='auto'): record the call with `tcsmt record`")
    from tcsmt.hwcheck.stamp import import_torch

    record_missing(import_torch(), call, target.gpu, folder, target.device_index)
    return answer(call, target.gpu, plans_dirs=(*others, str(folder)), stamp=target.stamp)
