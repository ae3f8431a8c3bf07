"""Folders the stack writes into: made with their parents when missing, a
file in the way or a folder that cannot be made a one-line error."""

from __future__ import annotations

from pathlib import Path

from aiko.model.errors import AikoError

__all__ = ["make_folder", "FolderError"]


class FolderError(AikoError):
    """``path`` cannot be used as a folder: ``reason`` says why."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path, self.reason = path, reason
        super().__init__(f"{path}: {reason}")


def make_folder(path: Path) -> Path:
    """``path`` as a folder, made with its parents if it does not exist."""
    if path.exists() and not path.is_dir():
        raise FolderError(path, "not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FolderError(path, f"cannot make the folder ({exc.strerror})") from None
    return path
