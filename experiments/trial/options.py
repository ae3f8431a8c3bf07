"""The table of a trial's settings: every option ``aiko run`` takes besides
its gait (and that ``aiko doctor``, a campaign plan's entries and the other
commands share), with its name, default, flag, parser, help and group, and
the parsers of its values. :mod:`aiko.experiments.cli.flags` generates the
command line from it; :mod:`.settings` lays the values over each other.
Pure: no I/O."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from aiko.control.faults import TOLERABLE
from aiko.control.gait import JOINT_LIMIT
from aiko.control.preflight import OMEGA_MAX
from aiko.drivers.mocap_sources import SERVED_KINDS
from aiko.drivers.vendor_mocap import split_address
from aiko.model.errors import AikoError

__all__ = ["Option", "OPTIONS", "OPTION", "PLAN_KEY", "SettingsError", "MocapSpec",
           "parse_mocap_spec", "FAULT_KINDS", "checked_number", "options_of"]

MOCAP_SPELLING = ("vicon-udp[:PORT], " + ", ".join(f"{k}:HOST[:PORT]" for k in SERVED_KINDS)
                  + " or none")
"""What ``--mocap`` takes."""

FAULT_KINDS = TOLERABLE
"""The faults ``--tolerate`` may name (every other fault always stops a trial;
:mod:`aiko.control.faults`)."""


class SettingsError(AikoError):
    """Settings that cannot be used: ``reason`` (one line, naming the flag),
    ``name`` the setting at fault where there is one."""

    def __init__(self, reason: str, name: str | None = None) -> None:
        self.reason, self.name = reason, name
        super().__init__(reason)


# ---------------------------------------------------------------- parsers


def checked_number(kind: str, cast: Callable = float, ok: Callable[[Any], bool] = lambda v: True,
                   expect: str = "", finite: bool = True) -> Callable[[str], Any]:
    """A parser of text: ``cast`` it, check it with ``ok``; ValueError with a
    one-line message (``finite=False`` lets a float be inf)."""
    noun = "an integer" if cast is int else "a number"

    def parse(text: str):
        try:
            v = cast(text)
        except ValueError:
            raise ValueError(f"{kind} must be {noun}, got {text!r}") from None
        if (cast is float and finite and not math.isfinite(v)) or not ok(v):
            raise ValueError(f"{kind} must {expect}, got {text}")
        return v
    return parse


def _positive(kind: str) -> Callable[[str], float]:
    return checked_number(kind, float, lambda v: v > 0, "be a positive number")


def _nonneg(kind: str) -> Callable[[str], float]:
    return checked_number(kind, float, lambda v: v >= 0, "be a number >= 0")


def _window(text: str) -> tuple[float, float]:
    """``T0:T1`` (s, 0 <= T0 < T1) -> (T0, T1); ValueError with a one-line message."""
    a, sep, b = text.partition(":")
    try:
        t0, t1 = float(a), float(b)
    except ValueError:
        raise ValueError(f"{text!r}: expected T0:T1 in seconds") from None
    if not sep or not (math.isfinite(t0) and math.isfinite(t1) and 0 <= t0 < t1):
        raise ValueError(f"{text!r}: expected T0:T1 with 0 <= T0 < T1")
    return t0, t1


_port = checked_number("port", int, lambda v: 0 <= v <= 65535, "lie in 0..65535")
_nodes = checked_number("nodes", int, lambda v: 1 <= v <= 63, "lie in 1..63")
_bitrate = checked_number("bitrate", int, lambda v: v > 0, "be a positive integer")
_finite = checked_number("heading", float)


@dataclass(frozen=True)
class MocapSpec:
    """``--mocap``'s value: the source's kind, and the DataStream's host or the
    UDP port where it names one."""

    source: str
    host: str | None = None
    port: int | None = None


def parse_mocap_spec(spec: str) -> MocapSpec:
    """``vicon-udp[:PORT] | vicon-datastream:HOST[:PORT] | qualisys:HOST[:PORT] |
    none`` (the one place the
    spelling is read); ValueError with a one-line message."""
    if spec == "none":
        return MocapSpec("none")
    kind, _, arg = spec.partition(":")
    if kind == "vicon-udp":
        if not arg:
            return MocapSpec(kind)
        try:
            port = int(arg)
        except ValueError:
            raise ValueError(f"{spec}: the port must be an integer") from None
        if not 0 <= port <= 65535:
            raise ValueError(f"{spec}: port out of range")
        return MocapSpec(kind, port=port)
    if kind in SERVED_KINDS and arg:
        split_address(arg, SERVED_KINDS[kind].port)     # a bad port is an error here
        return MocapSpec(kind, host=arg)
    raise ValueError(f"{spec!r}: expected {MOCAP_SPELLING}")


# ---------------------------------------------------------------- the table


@dataclass(frozen=True)
class Option:
    """One setting: ``name`` (a Python name; the flag is ``--`` and the name
    with dashes unless ``flag`` says otherwise), its ``default``, ``help``,
    ``parse`` (text to value, ValueError with a message; None: the text),
    ``choices``, ``kind`` (``value``; ``switch``: on when given; ``list``:
    repeatable; ``port``: a port, or ``const`` when given bare), ``group``
    (the --help section), ``commands`` that take it, ``exclusive`` (options
    of one exclusive set name it), ``defaults``: (command, value, text) for
    the commands outside the settings' layers (``aiko emulate``, ``replay``,
    ...): the flag's default there and what its help says of it.
    ``aiko run`` and ``aiko doctor`` take the settings' defaults."""

    name: str
    default: Any
    help: str
    group: str
    commands: tuple[str, ...] = ("run",)
    parse: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    kind: Literal["value", "switch", "list", "port"] = "value"
    const: Any = None
    flag: str | None = None
    exclusive: str | None = None
    defaults: tuple[tuple[str, Any, str | None], ...] = ()

    @property
    def flag_name(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    def default_for(self, command: str) -> tuple[Any, str | None]:
        """The flag's default in ``command`` and what its help says of it
        (None, None: not given, the settings' default applies)."""
        for cmd, value, text in self.defaults:
            if cmd == command:
                return value, text
        return None, None

    def parse_text(self, text: str) -> Any:
        """A value given as text (a flag's), checked."""
        if self.choices is not None and text not in self.choices:
            raise ValueError(f"invalid choice: {text!r} (choose from "
                             f"{', '.join(self.choices)})")
        return text if self.parse is None else self.parse(text)


RIG, TRIAL, VIEW, STEER, PLANT, MODEL = ("rig", "trial", "view", "steering", "plant", "model")
_BOTH = ("run", "doctor")

OPTIONS: tuple[Option, ...] = (
    # the rig: run and doctor (and the rig file)
    Option("rig", "simulated", "simulated: start the simulated Aiko (default without a rig file); "
           "robot: the real bus and motion capture", RIG, choices=("simulated", "robot")),
    Option("can_interface", "socketcan", "python-can interface: socketcan (default), slcan, "
           "pcan, kvaser, ...", RIG, _BOTH, metavar="NAME"),
    Option("can_channel", "can0", "channel, e.g. can0 (default), /dev/ttyACM0, "
           "socket://127.0.0.1:PORT", RIG, _BOTH, metavar="CH"),
    Option("bitrate", None, "bit rate in bit/s (robot: 1000000)", RIG, _BOTH, _bitrate,
           metavar="B"),
    Option("nodes", 10, "joint modules 1..N (default 10)", RIG, ("run", "doctor", "emulate"),
           _nodes, metavar="N", defaults=(("emulate", 10, None),)),
    Option("limit_deg", math.degrees(JOINT_LIMIT), "the joints' mechanical limit, deg (the "
           f"preflight's and the steering's; default {math.degrees(JOINT_LIMIT):.0f})", RIG,
           parse=_positive("limit"), metavar="DEG"),
    Option("max_speed_deg_s", math.degrees(OMEGA_MAX), "the motors' full-duty speed, deg/s "
           f"(the preflight's; default {math.degrees(OMEGA_MAX):.1f})", RIG,
           parse=_positive("max speed"), metavar="DEG/S"),
    Option("mocap", None, f"{MOCAP_SPELLING} (default: none "
           "on the robot, the simulated Aiko's stream on the simulated rig)", RIG, _BOTH,
           parse_mocap_spec, metavar="SRC"),
    Option("mocap_subject", "link6", "the tracked object (UDP object name or DataStream "
           "subject; default link6)", RIG, _BOTH, metavar="NAME"),
    Option("mocap_segment", "link6", "DataStream segment of the subject: the DataStream "
           "client reads a Tracker object, whose one segment bears the subject's name "
           "(default: the subject's)", RIG, _BOTH, metavar="NAME"),
    Option("mocap_rate", 20.0, "motion-capture logging rate, Hz; the stream must reach it "
           "(default 20)", RIG, _BOTH, _positive("mocap rate"), metavar="HZ"),
    Option("mqtt", None, "telemetry broker, mqtt://[user:pass@]host[:port][/prefix] or "
           "mqtts://", RIG, _BOTH, metavar="URL"),
    Option("mqtt_ca", None, "CA file for mqtts://", RIG, _BOTH, metavar="FILE"),
    Option("mqtt_model", False, "publish the parallel model's link 6 to the broker too "
           "(.../model, at the motion-capture rate)", RIG, kind="switch"),
    Option("trials_folder", None, "where trial logs go (default: the working folder)", RIG,
           _BOTH, metavar="DIR"),
    # the trial
    Option("duration", None, "trial length, s (default: 15 on the simulated rig, until "
           "Ctrl-C on the robot)", TRIAL, parse=_positive("duration"), metavar="S"),
    Option("force", False, "stream a gait the preflight refuses (clamped at the joint "
           "limits; logged)", TRIAL, kind="switch"),
    Option("ramp_time", None, "time to ramp the joints to the gait's start posture (default: "
           "the fastest joint at 25 % of its motor's full-duty speed)", TRIAL,
           parse=_nonneg("ramp time"), metavar="S"),
    Option("end", "hold", "when the duration is over: hold the last posture (default) or "
           "ramp every joint back to 0 first; faults and Ctrl-C always hold", TRIAL,
           choices=("hold", "straight")),
    Option("tolerate", (), "keep going after this fault: current-limit (a motor at full duty "
           "for over 200 ms) or encoder-fault (an implausible encoder reading); a lost or "
           "restarted node always stops the trial (default: every fault stops it); "
           "repeatable", TRIAL, choices=FAULT_KINDS, metavar="FAULT", kind="list"),
    Option("startup_timeout", 2.0, "wait this long for every node's heartbeat (default 2)",
           TRIAL, parse=_positive("startup timeout"), metavar="S"),
    Option("no_model", False, "do not run the model in parallel (no comparison)", TRIAL,
           kind="switch"),
    Option("time", "real", "real: the trial in real time (default; the robot, the live "
           "views and a rehearsal need it); virtual: the simulated rig in virtual time, "
           "every part in lockstep on one clock, as fast as the computer allows and the "
           "same records on any machine", TRIAL, choices=("real", "virtual")),
    Option("scene", None, "obstacles on the floor: a scene file ([[peg]] x, y, radius, mu; "
           "[[step]] x0, height, mu) or a preset (pegs-grid)", TRIAL,
           ("run", "emulate", "replay", "optimize", "simulate", "sweep"),
           metavar="FILE.toml|NAME",
           defaults=(("run", None, "in the parallel model, in the simulated Aiko, whose "
                      "motion capture then streams each peg as peg1, peg2, ..., and in the "
                      "log"),
                     ("emulate", None, "each peg is streamed as a motion-capture object peg1, "
                      "peg2, ..."),
                     ("replay", None, "default: the trial's scene, as logged"),
                     ("optimize", None, "for every candidate"),
                     ("sweep", None, "for every point"))),
    # watching it live
    Option("live", None, "serve a live page of the trial on http://127.0.0.1:PORT/ (default "
           "port 8765; 0: any free port): link 6 from motion capture and from the model, "
           "x(t), y(t), the heading when steering, the status", VIEW, parse=_port,
           metavar="PORT", kind="port", const=8765),
    Option("live_host", "127.0.0.1", "bind the live page (and --foxglove) to this address "
           "instead of 127.0.0.1, e.g. 0.0.0.0 to let other machines watch", VIEW,
           metavar="HOST"),
    Option("foxglove", None, "serve the trial to Foxglove (WebSocket protocol, default port "
           "8766): the links as a 3D scene, link 6, steering, status, events", VIEW,
           parse=_port, metavar="PORT", kind="port", const=8766),
    # steering
    Option("heading_deg", None, "hold this heading of travel (deg from motion capture's x "
           "axis toward y)", STEER, parse=_finite, metavar="DEG", flag="--heading",
           exclusive="target"),
    Option("path", None, "follow a straight line or waypoint polyline with line-of-sight "
           "guidance ([path] waypoints = [[x, y], ...] m, lookahead, accept)", STEER,
           metavar="FILE.toml", exclusive="target"),
    Option("steer_gain", 0.25, "offset per heading error, deg/deg (default 0.25)", STEER,
           parse=_positive("steer gain"), metavar="K"),
    Option("steer_ki", 0.015, "integral gain, deg of offset per deg s of heading error "
           "(default 0.015; 0: proportional only); takes out a steady turn, e.g. from joints "
           "whose zero is off", STEER, parse=_nonneg("steer ki"), metavar="K"),
    Option("steer_max_deg", 15.0, "largest offset (default 15; less where the gait's "
           "amplitude leaves less room to the joint limits)", STEER,
           parse=_positive("steer max"), metavar="DEG"),
    Option("steer_hold", 1.0, "on stale motion capture, hold the last offset this long "
           "before falling back to open loop (default 1)", STEER,
           parse=_nonneg("steer hold"), metavar="S"),
    Option("steer_window", None, "the heading estimate's window (default: one gait period)",
           STEER, parse=_positive("steer window"), metavar="S"),
    # the simulated Aiko
    Option("plant", "realistic", "realistic: 4 deg free play, the modules' servo limits, "
           "0.5 mm mocap noise (default); ideal: none of them", PLANT,
           choices=("realistic", "ideal")),
    Option("backlash_deg", None, "free play between motor and link, deg", PLANT,
           ("run", "emulate", "replay", "optimize"), _nonneg("backlash"), metavar="DEG",
           defaults=(("emulate", 4.0, "default 4"),
                     ("replay", None, "default none; given, the replay goes through the "
                      "emulated modules' motors, the simulated Aiko's physics"),
                     ("optimize", None, "evaluate on the simulated Aiko: emulated modules "
                      "with this free play driving the model; default: the model alone"))),
    Option("servo", None, "module: the firmware's duty- and speed-limited servo; ideal: "
           "motors at their reference at every instant", PLANT,
           ("run", "emulate", "replay", "fit", "optimize"), choices=("module", "ideal"),
           defaults=(("emulate", "module", "default module"),
                     ("replay", None, "with --backlash-deg; default ideal"),
                     ("fit", None, "with backlash; default ideal"),
                     ("optimize", "module", "with --backlash-deg; default module"))),
    Option("mocap_noise_mm", None, "motion-capture noise (standard deviation per "
           "coordinate)", PLANT, ("run", "emulate"), _nonneg("mocap noise"), metavar="MM",
           defaults=(("emulate", 0.5, "default 0.5"),)),
    Option("mocap_latency_ms", None, "motion-capture latency, the age of the positions in "
           "each datagram", PLANT, ("run", "emulate"), _nonneg("mocap latency"),
           metavar="MS", defaults=(("emulate", 0.0, "default 0"),)),
    Option("mocap_occlusion", (), "a window of the simulated Aiko's time (s) in which its "
           "motion capture sees no link (the pegs stay in view), to rehearse an occlusion; "
           "repeatable", PLANT, ("run", "emulate"), _window, metavar="T0:T1", kind="list"),
    Option("start_curve", None, "the simulated Aiko starts at rest laid along this curve "
           "([curve] polyline or arc; see aiko simulate --start-curve), its joints at those "
           "angles", PLANT, ("run", "emulate"), metavar="FILE.toml",
           defaults=(("run", None, "the trial's ramp then takes its joints to the gait's "
                      "start posture"),)),
    Option("plant_seed", None, "the seed of the simulated motion capture's noise (default "
           "0): one seed, one trial, in virtual time", PLANT,
           parse=checked_number("plant seed", int, lambda v: v >= 0, "be >= 0"), metavar="N"),
    Option("plant_fault", (), "an emulated module's fault, as aiko emulate --fault (drop=F, "
           "delay=S, silent, encoder[=h|v], saturate[=h|v], babble=RATE; @T s after the "
           "simulated Aiko's start), to rehearse a fault; repeatable", PLANT,
           metavar="NODE:KIND[=V][@T]", kind="list"),
    Option("plant_mu", None, "the simulated floor's friction, if it differs from the gait's",
           PLANT, parse=_nonneg("plant mu"), metavar="MU"),
    Option("plant_mu_x", None, "the simulated floor's friction along the links", PLANT,
           parse=_nonneg("plant mu-x"), metavar="MU"),
    Option("plant_mu_y", None, "the simulated floor's friction across the links", PLANT,
           parse=_nonneg("plant mu-y"), metavar="MU"),
    # the model's parameters, for the commands that run it offline or as the plant
    Option("mu", None, "isotropic floor friction", MODEL, ("simulate", "replay"),
           _nonneg("mu"), metavar="MU",
           defaults=(("simulate", None, "default: the gait's, else 0.2"),)),
    Option("mu_x", None, "floor friction along the links", MODEL,
           ("simulate", "replay", "emulate"), _nonneg("mu-x"), metavar="MU",
           defaults=(("emulate", 0.2, "default 0.2"),)),
    Option("mu_y", None, "floor friction across the links", MODEL,
           ("simulate", "replay", "emulate"), _nonneg("mu-y"), metavar="MU",
           defaults=(("emulate", 0.2, "default 0.2"),)),
    Option("dt", None, "the model's time step, s", MODEL, ("simulate", "replay", "optimize"),
           _positive("dt"), metavar="S",
           defaults=(("simulate", None, "default 0.001"),
                     ("replay", None, "default 0.001; a plant's replay of a simulated-rig "
                      "trial: the plant's, from its log"),
                     ("optimize", None, "default 0.001"))),
    Option("u_tol", None, "the contact solver's velocity tolerance, m/s", MODEL,
           ("replay", "fit", "emulate"), _positive("u-tol"), metavar="M_S",
           defaults=(("replay", None, "default: the model's, 1e-6; a plant's replay of a "
                      "simulated-rig trial: the plant's, from its log"),
                     ("fit", None, "default: the model's, 1e-6; a plant's replay of a "
                      "simulated-rig trial: the plant's, from its log"),
                     ("emulate", 1e-5, "default 1e-5"))),
    Option("max_iter", None, "the contact solver's sweeps per step at most", MODEL,
           ("replay", "fit", "emulate"),
           checked_number("max-iter", int, lambda v: v >= 1, "be >= 1"), metavar="N",
           defaults=(("replay", None, "default: the model's, 500; a plant's replay of a "
                      "simulated-rig trial: the plant's, from its log"),
                     ("fit", None, "default: the model's, 500; a plant's replay of a "
                      "simulated-rig trial: the plant's, from its log"),
                     ("emulate", 30, "default 30"))),
    Option("links", 11, "number of links", MODEL, ("simulate", "preview"),
           checked_number("links", int, lambda v: v >= 1, "be >= 1"), metavar="N",
           defaults=(("simulate", 11, "default 11"), ("preview", 11, "default 11"))),
)
"""Every setting of a trial, in the order ``--check`` shows them."""

OPTION: dict[str, Option] = {o.name: o for o in OPTIONS}
PLAN_KEY: dict[str, Option] = {o.flag_name[2:].replace("-", "_"): o for o in OPTIONS
                               if "run" in o.commands}
"""A campaign entry's keys: ``aiko run``'s flags, dashes as underscores."""


def options_of(command: str, groups: Iterable[str] | None = None) -> list[Option]:
    """The options ``command`` takes (of these groups), in the table's order."""
    wanted = None if groups is None else set(groups)
    return [o for o in OPTIONS if command in o.commands and (wanted is None or o.group in wanted)]
