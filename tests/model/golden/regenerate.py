"""Regenerate the golden trajectories: python tests/model/golden/regenerate.py

Each file is the CSV of `aiko simulate` for a short, non-chaotic run (the
paper's step also on the paper's rigid contact). Only
regenerate after a deliberate change of the model, and say why in the commit.
"""

from pathlib import Path

from aiko.experiments.cli import main

HERE = Path(__file__).parent

CASES = {
    "sidewinding_0.5s.csv": ["simulate", "sidewinding", "--duration", "0.5", "--rate", "20"],
    "slope_slide_0.5s.csv": ["simulate", "still", "--duration", "0.5", "--rate", "20",
                             "--slope", "15", "--links", "3"],
    "drop_orthotropic_0.3s.csv": ["simulate", "lateral-undulation-orthotropic", "--duration",
                                  "0.3", "--rate", "20", "--height", "0.02", "--links", "5"],
    "sidewinding_paper_step_0.5s.csv": ["simulate", "sidewinding", "--duration", "0.5",
                                        "--rate", "20", "--drive", "explicit", "--dt",
                                        "0.00025", "--k-N", "inf"],
}

if __name__ == "__main__":
    for name, args in CASES.items():
        main([*args, "--out", str(HERE / name)])
