"""Write the reference tables the documentation includes, from the code's own
schemas: docs/.ref/trial-log-channels.md (every channel of the trial log and
its fields, from aiko.experiments.files.triallog.CHANNELS) and
docs/.ref/mqtt-topics.md (every telemetry topic, its QoS, retain and fields,
from aiko.drivers.messages and aiko.drivers.telemetry.TOPIC_QOS),
docs/.ref/faults.md and docs/.ref/emcy.md (every fault the stack stops or
refuses a trial for, and every EMCY code, from aiko.control.faults),
docs/.ref/plants.md (the simulated Aiko's two plants, from
aiko.experiments.rig.plant_params.PlantParams), docs/.ref/csv-columns.md
(the files and columns of `aiko export --format csv`, from
aiko.experiments.analysis.export), docs/.ref/rig-file-keys.md (every key
of the rig file, the flag it stands for, its default and help, from
aiko.experiments.files.rig_file and the settings' table) and
docs/.ref/plan-keys.md (a campaign plan's keys, from
aiko.experiments.files.campaign_plan and the settings' table).

    python docs/reference_tables.py     # regenerate after changing a schema

tests/docs/test_docs_agree.py fails while a table differs from the code."""

from __future__ import annotations

import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / ".ref"


def _type(schema: dict) -> str:
    if "const" in schema:
        return f'"{schema["const"]}"'
    t = schema.get("type", "any")
    types = t if isinstance(t, list) else [t]
    if "array" in types and "items" in schema:
        inner = _type(schema["items"])
        types = [f"array of {inner}" if x == "array" else x for x in types]
    return " or ".join(types)


def _fields(props: dict) -> str:
    return ", ".join(f"`{name}` ({_type(s)})" for name, s in props.items())


def trial_log_table() -> str:
    from aiko.experiments.files.triallog import CHANNELS

    rows = ["| channel | schema | fields |", "|---|---|---|"]
    for channel, schema in CHANNELS.items():
        rows.append(f"| `{channel}` | `{schema['title']}` | {_fields(schema['properties'])} |")
    return "\n".join(rows) + "\n"


def mqtt_table() -> str:
    from aiko.drivers.messages import MESSAGE_KINDS
    from aiko.drivers.telemetry import TOPIC_QOS

    rows = ["| topic | QoS | retained | what | fields |", "|---|---|---|---|---|",
            "| `status` | 1 | yes | the runner's state: `online` when connected, `offline` when "
            "the trial's telemetry ends and, as the connection's last will, when the runner "
            "dies | `state`, `trial`, `reason` (offline) |"]
    for kind in MESSAGE_KINDS:
        if kind.topic not in TOPIC_QOS:   # the live views' own
            continue
        rows.append(f"| `{kind.topic}` | {TOPIC_QOS[kind.topic]} | no | {kind.about} "
                    f"(`{kind.__name__}`) | {_fields(kind.SCHEMA['properties'])} |")
    return "\n".join(rows) + "\n"


def _example(message: str) -> str:
    """A fault's message with example values, as a user reads it."""
    return message.format(node="N", age=0.31, motor="H", nodes="nodes 2, 3", timeout=2.0)


def fault_table() -> str:
    from aiko.control.faults import START_FAULTS, TRIAL_FAULTS

    rows = ["| what `aiko run` says | kind | exit | what it means | tolerate | what to do |",
            "|---|---|---|---|---|---|"]
    for row in TRIAL_FAULTS + START_FAULTS:
        tolerate = f"`--tolerate {row.tolerate}`" if row.tolerate else "never"
        rows.append(f"| `{_example(row.message)}` | `{row.kind}` | {row.exit} | {row.meaning} "
                    f"| {tolerate} | {row.action} |")
    return "\n".join(rows) + "\n"


def emcy_table() -> str:
    from aiko.control.faults import EMCY_ROWS

    rows = ["| EMCY | name | what the module means | what the stack does | what to do |",
            "|---|---|---|---|---|"]
    for row in EMCY_ROWS:
        does = (f"stops the trial (`{row.stops}`) unless tolerated" if row.stops
                else "logs it (`/emcy`), the trial goes on")
        rows.append(f"| `0x{row.code:04X}` | {row.name} | {row.meaning} | {does} "
                    f"| {row.action} |")
    return "\n".join(rows) + "\n"


def _power_of_ten(x: float) -> str:
    """1e-05 as 1e-5: a tolerance as the pages write it."""
    mantissa, exponent = f"{x:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def plant_table() -> str:
    from aiko.experiments.rig.plant_params import PlantParams

    rows = ["| `--plant` | free play | servo | mocap noise | mocap latency | mocap rate "
            "| solver |", "|---|---|---|---|---|---|---|"]
    servo = {"module": "the module's (duty limit, speed limit)",
             "ideal": "ideal (motor at its reference)"}
    for name, p in (("realistic", PlantParams.realistic()), ("ideal", PlantParams.ideal())):
        label = f"`{name}` (default)" if name == "realistic" else f"`{name}`"
        rows.append(f"| {label} | {p.backlash_deg:g} deg | {servo[p.servo]} "
                    f"| {p.mocap_noise_mm:g} mm | {p.mocap_latency_ms:g} ms "
                    f"| {p.mocap_rate:g} Hz | u_tol {_power_of_ten(p.u_tol)} m/s, at most {p.max_iter} "
                    f"sweeps a step, dt {1000 * p.dt:g} ms |")
    return "\n".join(rows) + "\n"


def csv_table() -> str:
    from aiko.experiments.analysis.export import (
        CSV_CHANNELS,
        EVENT_COLUMNS,
        JOINT_COLUMNS,
        REFERENCE_COLUMNS,
    )

    def cols(names) -> str:
        return ", ".join(f"`{c}`" for c in names)

    per_node = ", ".join(f"`{q}_N`" for q in JOINT_COLUMNS)
    rows = ["| file | from | columns |", "|---|---|---|",
            f"| `STEM-references.csv` | `/references` | {cols(REFERENCE_COLUMNS)}, then "
            f"{per_node} for each node N |"]
    for channel, (name, keys) in CSV_CHANNELS.items():
        rows.append(f"| `STEM-{name}.csv` | `{channel}` | {cols(('t_log', *keys))} |")
    rows.append(f"| `STEM-events.csv` | `/events` | {cols(EVENT_COLUMNS)} (the data as JSON) |")
    return "\n".join(rows) + "\n"


def _default(value) -> str:
    if value is None or value == ():
        return "none"
    if isinstance(value, bool):          # as TOML spells it
        return f"`{str(value).lower()}`"
    if isinstance(value, float):         # as the help texts give them (45, not 45.0001)
        return f"{value:.4g}"
    return f"`{value}`"


def rig_file_table() -> str:
    import tempfile

    from aiko.drivers.mocap import VICON_UDP_PORT
    from aiko.experiments.files.rig_file import MOCAP_SOURCES, rig_file_keys
    from aiko.experiments.trial.options import OPTIONS
    from aiko.experiments.trial.settings import build_settings

    by_name = {o.name: (f"`{o.flag_name}`", o.help) for o in OPTIONS}
    by_name.update({   # the parts of --mocap, and what only the file gives
        "mocap_source": ("`--mocap SOURCE`", f"the motion capture: {', '.join(MOCAP_SOURCES)} "
                         "(none: the Tracker stream of the simulated Aiko on the simulated "
                         "rig, no motion capture on the robot)"),
        "mocap_host": ("`--mocap KIND:HOST[:PORT]`", "the motion capture server's address "
                       "(vicon-datastream, qualisys)"),
        "mocap_port": ("`--mocap vicon-udp:PORT`", "the UDP port the Tracker stream comes to "
                       f"(none: {VICON_UDP_PORT} on the robot, a free port on the simulated "
                       "rig)"),
        "mqtt_password_env": ("(the file only)", "the environment variable that holds the "
                              "broker's password (never the password itself)"),
        "trials_name": ("(the file only)", "the trial log's name, with the fields {gait} and "
                        "{time}"),
    })
    with tempfile.TemporaryDirectory() as empty:   # the defaults: no rig file, no flag
        defaults = build_settings({}, cwd=Path(empty)).sources
    rows = ["| key | flag | default | what it sets |", "|---|---|---|---|"]
    for table, key, setting in rig_file_keys():
        flag, what = by_name[setting]
        what = what.replace("|", "\\|")
        rows.append(f"| `[{table}] {key}` | {flag} | {_default(defaults[setting].value)} "
                    f"| {what} |")
    return "\n".join(rows) + "\n"


CAMPAIGN_KEY_HELP = {
    "name": ("(required)", "the campaign's name: letters, digits, `.`, `-`, `_`"),
    "folder": ("the name", "where its trials, index and summary go, relative to the plan file"),
    "order": ("`as-written`", "`as-written` or `shuffled` (seeded: the same order on every "
              "resume)"),
    "seed": ("`0`", "the shuffle's seed"),
    "rig_file": ("none: the simulated rig", "the robot's rig file, relative to the plan file"),
    "pause": ("`0`", "seconds between trials when nobody is asked"),
    "gait": ("(required)", "a preset or a gait file, relative to the plan file"),
    "duration": ("(required)", "the trial's length, s"),
    "repetitions": ("`1`", "how many times the entry runs"),
}
"""What the plan's own keys do (their checks are the plan loader's)."""


def plan_table() -> str:
    from aiko.experiments.files.campaign_plan import CAMPAIGN_KEYS, ENTRY_KEYS, RESERVED
    from aiko.experiments.trial.options import PLAN_KEY

    rows = ["| key | default | what it sets |", "|---|---|---|"]
    for key in CAMPAIGN_KEYS:
        default, what = CAMPAIGN_KEY_HELP[key]
        rows.append(f"| `[campaign] {key}` | {default} | {what} |")
    for key in ENTRY_KEYS:
        if key == "name":
            rows.append("| `[[trial]] name` | the gait's | the entry's name in files and "
                        "tables (unique in the plan) |")
            continue
        default, what = CAMPAIGN_KEY_HELP[key]
        rows.append(f"| `[[trial]] {key}` | {default} | {what} |")
    for key, opt in PLAN_KEY.items():
        if key in RESERVED or key in ENTRY_KEYS:
            continue
        what = f"as `aiko run {opt.flag_name}`: {opt.help}".replace("|", "\\|")
        rows.append(f"| `[[trial]] {key}` | {_default(opt.default)} | {what} |")
    return "\n".join(rows) + "\n"


def tables() -> dict[str, str]:
    return {"trial-log-channels.md": trial_log_table(), "mqtt-topics.md": mqtt_table(),
            "faults.md": fault_table(), "emcy.md": emcy_table(), "plants.md": plant_table(),
            "csv-columns.md": csv_table(), "rig-file-keys.md": rig_file_table(),
            "plan-keys.md": plan_table()}


def main() -> int:
    OUT.mkdir(exist_ok=True)
    for name, text in tables().items():
        (OUT / name).write_text(text)
    print(f"wrote {len(tables())} tables to {OUT.name}/", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
