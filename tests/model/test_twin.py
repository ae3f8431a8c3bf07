"""The compiled step against its readable dense twin (aiko.model.reference), for
every solver and several kinds of contact states; and the kernels' bodies run
once without compilation."""

import math
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from aiko.control import PRESETS, references
from aiko.experiments.analysis.simulate import initial_state_for_gait
from aiko.model import ConvergenceWarning, SnakeModel, SnakeParams, SolverParams
from aiko.model.reference import reference_step

CASES = ("resting", "impact", "impact-rigid", "sliding", "sidewinding", "sidewinding-rigid",
         "undulation")


@pytest.fixture(scope="module")
def states():
    """(params, state, refs) by case: resting, impacting, sliding,
    sidewinding, undulating; impacting and sidewinding on the rigid contact
    too. Made once the first test asks (not at collection, which every worker
    of the test run repeats)."""
    with warnings.catch_warnings():  # the soft start's transient has capped steps
        warnings.simplefilter("ignore", ConvergenceWarning)
        out = _states()
    assert tuple(name for name, *_ in out) == CASES
    return {name: case for name, *case in out}


def _states():
    """(label, params, state, refs) of every case."""
    out = []
    p = SnakeParams()
    m = SnakeModel(p)
    out.append(("resting", p, m.initial_state(), np.zeros((10, 4))))
    s = m.state_from_q(m.initial_state(height=0.0).q, u=np.tile([0.1, 0.0, -0.5, 0.3, 0.2, 0.0],
                                                                (11, 1)))
    out.append(("impact", p, s, np.zeros((10, 4))))
    # the paper's rigid contact (the impact's spheres press the springs past
    # their push-out cap, v_N, in the default's step)
    out.append(("impact-rigid", p.with_(k_N=math.inf), s, np.zeros((10, 4))))
    ps = SnakeParams(slope_deg=20.0, mu_x=0.1, mu_y=0.4)
    ms = SnakeModel(ps)
    s, _ = ms.advance(ms.initial_state(), 0.05)
    out.append(("sliding", ps, s, np.zeros((10, 4))))
    g = PRESETS["sidewinding"]
    s = initial_state_for_gait(m, g)
    t = np.arange(2400) * m.dt
    s, _ = m.run_steps(s, references(g, t, 10))
    out.append(("sidewinding", p, s, references(g, s.t, 10)))
    out.append(("sidewinding-rigid", p.with_(k_N=math.inf), s, references(g, s.t, 10)))
    g = PRESETS["lateral-undulation-orthotropic"]
    po = SnakeParams(mu_x=0.1, mu_y=0.5)
    mo = SnakeModel(po)
    s = initial_state_for_gait(mo, g)
    s, _ = mo.run_steps(s, references(g, t[:1200], 10))
    out.append(("undulation", po, s, references(g, s.t, 10)))
    return out


@pytest.mark.parametrize("solver", ["newton", "jor", "sor", "sor/1", "sor/3/explicit",
                                    "sor/3/implicit/0.5", "newton/3/explicit"])
@pytest.mark.parametrize("label", CASES)
def test_kernel_step_equals_dense_reference(label, solver, states):
    """solver/passes/drive/drive weight; sor/1: plain SOR, one pass over a
    link's contacts per sweep; the default drive is implicit."""
    params, state, refs = states[label]
    if label in ("sidewinding", "sidewinding-rigid", "undulation"):  # extrapolated warm starts
        assert np.abs(state.dP).max() > 0
    name, passes, drive, weight = (solver.split("/") + ["3", "implicit", "1.0"][
        solver.count("/"):])[:4]
    model = SnakeModel(params, SolverParams(solver=name, link_passes=int(passes), drive=drive,
                                            drive_weight=float(weight)))
    qE, uE, P, active, dP, it, ok = reference_step(state.q, state.u, state.P, state.active, refs,
                                                   model._par, model._sol, dP=state.dP)
    new, stats = model.step(state, refs)
    assert stats.iterations == it
    np.testing.assert_array_equal(new.active, active)
    np.testing.assert_allclose(new.u, uE, atol=1e-11)
    np.testing.assert_allclose(new.q, qE, atol=1e-13)
    np.testing.assert_allclose(new.P[active], P[active], atol=1e-12)
    np.testing.assert_allclose(new.dP, dP, atol=1e-12)
    assert (stats.unconverged == 0) == ok


def test_kernels_without_jit_agree_with_compiled(tmp_path):
    """NUMBA_DISABLE_JIT=1 runs the kernel bodies as Python (coverage of the
    source itself); the results must equal the compiled ones."""
    script = textwrap.dedent("""
        import numpy as np, sys
        from aiko.control import PRESETS, references
        from aiko.experiments.analysis.simulate import initial_state_for_gait
        from aiko.model import ConvergenceWarning, SnakeModel, SnakeParams, SolverParams
        out = []
        for solver, drive, k_N in (("newton", "implicit", 1e6), ("jor", "implicit", 1e6),
                                   ("sor", "implicit", 1e6), ("sor", "explicit", 1e6),
                                   ("sor", "implicit", float("inf"))):
            m = SnakeModel(SnakeParams(n=4, k_N=k_N), SolverParams(solver=solver, drive=drive))
            g = PRESETS["sidewinding"]
            s = initial_state_for_gait(m, g, height=0.001)
            s, st = m.run_steps(s, references(g, 0.3 + np.arange(40) * m.dt, 3))
            out.append(np.concatenate([s.q.ravel(), s.u.ravel(), [st.iterations]]))
        # obstacles: a peg and a step within reach of the sliding snake
        from aiko.model.scene import Peg, Scene, Step
        m = SnakeModel(SnakeParams(n=4), scene=Scene((Peg(0.0, -0.11, 0.05),),
                                                     (Step(0.27, 0.03),)))
        s = m.state_from_q(m.initial_state().q, u=np.tile([0.4, -0.3, 0, 0, 0, 0], (4, 1)))
        touched = False
        for _ in range(4):
            s, st = m.run_steps(s, np.zeros((10, 3, 4)))
            touched |= bool(s.active[8:].any())
        assert touched
        out.append(np.concatenate([s.q.ravel(), s.u.ravel(), [st.iterations]]))
        np.save(sys.argv[1], np.array(out))
    """)
    results = []
    for jit_off in ("1", "0"):
        path = tmp_path / f"r{jit_off}.npy"
        env = dict(os.environ, NUMBA_DISABLE_JIT=jit_off)
        subprocess.run([sys.executable, "-c", script, str(path)], check=True, env=env,
                       timeout=600)
        results.append(np.load(path))
    np.testing.assert_allclose(results[0], results[1], rtol=0, atol=1e-12)
