"""The flags of a trial's settings, generated from the one table
(:data:`aiko.experiments.trial.settings.OPTIONS`): :func:`add_flags` adds a
command's options to its parser, one argparse group per section;
:func:`given_flags` reads back exactly those (setting name -> value, None
where not given), the only attributes of the parsed arguments a command
reads for its settings."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from aiko.experiments.cli.args import argparse_type
from aiko.experiments.trial.settings import OPTION, Option, options_of

__all__ = ["add_flags", "add_named_flags", "given_flags", "add_rig_file_flag", "GROUP_TITLES"]

GROUP_TITLES = {
    "rig": ("the rig", "Values given here override the rig file's."),
    "trial": ("the trial", None),
    "view": ("watching a trial live", None),
    "steering": (
        "steering: close the loop through motion capture (lateral undulation)",
        "A joint offset added to every horizontal joint turns the snake; a controller sets it "
        "every period from the heading of travel that motion capture sees (the mean of the "
        "links where it tracks three or more, else the tracked link, over one gait period: "
        "the estimate lags by about half a period). Stale motion capture holds the last "
        "offset for --steer-hold s, then the gait runs open loop until it is back; every "
        "period's estimate, target and offset go to the log's /steering."),
    "plant": ("the simulated Aiko (--rig simulated)", None),
    "model": ("the model", None),
}


def _argparse_type(opt: Option):
    """The option's parser as an argparse type: its message on a bad value."""
    return argparse_type(opt.parse_text, opt.name)


def add_rig_file_flag(parser, *, what: str = "the trial runs on the robot unless "
                      "--rig simulated") -> None:
    parser.add_argument("--rig-file", type=Path, default=None, metavar="FILE.toml",
                        help="the lab's rig described once (CAN, joints, motion capture, MQTT, "
                             "where trials go; default: aiko.toml in the working folder if "
                             f"there is one); flags override its values, and with it {what}")


def add_flags(parser, command: str, groups: Iterable[str] | None = None) -> None:
    """Add ``command``'s options (of ``groups``, default all) to ``parser``,
    one argument group per section of the table. In ``aiko run`` and ``aiko
    doctor`` every flag's default is None (not given): the defaults are the
    settings' (:func:`build_settings`)."""
    sections: dict[str, Any] = {}
    exclusive: dict[tuple[str, str], Any] = {}
    for opt in options_of(command, groups):
        if opt.group not in sections:
            title, description = GROUP_TITLES[opt.group]
            sections[opt.group] = parser.add_argument_group(title, description)
        target = sections[opt.group]
        if opt.exclusive is not None:
            key = (opt.group, opt.exclusive)
            if key not in exclusive:
                exclusive[key] = target.add_mutually_exclusive_group()
            target = exclusive[key]
        _add(target, opt, command)


def add_named_flags(target, command: str, *names: str) -> None:
    """Add these options of the table to ``target`` (a parser or one of its
    argument groups), with ``command``'s defaults (``aiko emulate``,
    ``replay``, ``fit``, ``optimize``, ``simulate``, ``preview``: the commands
    outside the settings' layers)."""
    for name in names:
        opt = OPTION[name]
        if command not in opt.commands:
            raise ValueError(f"aiko {command} does not take {opt.flag_name}")
        _add(target, opt, command)


def _add(target, opt: Option, command: str) -> None:
    default, said = opt.default_for(command)
    help_text = opt.help + (f" ({said})" if said else "")
    kw: dict[str, Any] = {"dest": opt.name, "help": help_text.replace("%", "%%")}
    if opt.kind == "switch":
        target.add_argument(opt.flag_name, action="store_true", default=None, **kw)
        return
    kw["metavar"] = opt.metavar or (None if opt.choices else opt.name.upper())
    if opt.choices is not None and opt.kind != "list":
        kw["choices"] = opt.choices
        kw.pop("metavar")
    elif opt.parse is not None:
        kw["type"] = _argparse_type(opt)
    if opt.kind == "list":
        if opt.choices is not None:
            kw["type"] = _argparse_type(opt)
        target.add_argument(opt.flag_name, action="append", default=None, **kw)
    elif opt.kind == "port":
        target.add_argument(opt.flag_name, nargs="?", const=opt.const, default=None, **kw)
    else:
        target.add_argument(opt.flag_name, default=default, **kw)


def given_flags(args: argparse.Namespace, command: str,
                groups: Iterable[str] | None = None) -> dict[str, Any]:
    """The settings given as flags (name -> value; None: not given)."""
    out: dict[str, Any] = {}
    for opt in options_of(command, groups):
        value = getattr(args, opt.name)
        out[opt.name] = tuple(value) if isinstance(value, list) else value
    return out
