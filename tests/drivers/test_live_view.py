"""The live view: the page and its stream, binding, clients that go away or
never read (the trial never notices), Foxglove, and the page in a real
browser (headless Chromium) during a short trial on the simulated rig."""

import asyncio
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest
from websockets.asyncio.client import connect

from aiko.control.steering import SteeringConfig
from aiko.drivers.live import LiveView, LiveViewError
from aiko.drivers.messages import (
    EmcyMessage,
    Link6,
    MocapLinks,
    ModelLink6,
    StatusUpdate,
    SteeringUpdate,
    TrialEnd,
    TrialStart,
)
from tests.conftest import AIKO_COMMAND, trial_with_emulator


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.headers["Content-Type"], r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, None, b""


async def take(ws, n, timeout=5.0):
    """At least n records from the stream."""
    out = []
    while len(out) < n:
        out += json.loads(await asyncio.wait_for(ws.recv(), timeout))
    return out


def test_the_page_its_script_and_the_stream_with_the_history_for_late_pages():
    async def main():
        async with LiveView(port=0, title="t") as live:
            assert live.url == f"http://127.0.0.1:{live.port}/"
            status, ctype, body = await asyncio.to_thread(get, live.url)
            assert status == 200 and ctype.startswith("text/html") and b"live.js" in body
            status, ctype, body = await asyncio.to_thread(get, live.url + "live.js")
            assert status == 200 and "javascript" in ctype and b"WebSocket" in body
            assert (await asyncio.to_thread(get, live.url + "etc/passwd"))[0] == 404
            live.publish(TrialStart(0.0, "g", "path", None, ((0.0, 0.0), (1.0, 0.5))))
            for k in range(1200):                 # more than one message's worth
                live.publish(Link6(k / 20, k, k * 1e-3, 0.0, 0.05))
            live.publish(Link6(60.0, 1200, None, None, None))  # occluded: not drawn
            live.publish(SteeringUpdate(1.0, 0.5, "closed", 0.1, float("nan"), 0.2, None, None,
                                        None, None, None, None))
            live.publish(StatusUpdate(1.0, "gait", 3, 0, 0, 10, 10))
            live.publish(EmcyMessage(1.0, 2, 0x8611, 0x80, 1))   # not drawn
            live.publish(ModelLink6(1.0, "x", 0.0, 0.0, 0.0))  # malformed: dropped, never raised
            async with connect(f"ws://127.0.0.1:{live.port}/ws") as ws:
                recs = await take(ws, 1203)
            assert recs[0] == {"k": "start", "title": "t", "gait": "g", "steering": "path",
                               "target": None, "waypoints": [[0.0, 0.0], [1.0, 0.5]],
                               "pegs": [], "steps": []}
            assert [r["k"] for r in recs[1:1201]] == ["exp"] * 1200
            assert recs[1200]["x"] == pytest.approx(1.199)
            assert recs[1201]["k"] == "steer" and recs[1201]["heading"] is None
            assert recs[1202]["k"] == "status" and len(recs) == 1203
            # a page that comes later gets the same, then what follows
            async with connect(f"ws://127.0.0.1:{live.port}/ws") as ws:
                assert len(await take(ws, 1203)) == 1203
                live.publish(TrialEnd(2.0, "fault", {"kind": "lost_node", "node": 2,
                                                     "reason": "joint node 2 lost"}))
                (end,) = await take(ws, 1)
                assert end == {"k": "end", "t": 2.0, "reason": "fault",
                               "fault": "joint node 2 lost"}
            assert live.connections == 2
        # the server is gone with the context
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", live.port), timeout=1).close()

    asyncio.run(main())


def test_binding_stays_on_the_address_asked_for_and_a_taken_port_is_one_clear_error():
    async def main():
        async with LiveView("127.0.0.2", 0) as live:
            assert (await asyncio.to_thread(get, live.url))[0] == 200
            with pytest.raises(OSError):                 # not on 127.0.0.1
                socket.create_connection(("127.0.0.1", live.port), timeout=1).close()
            with pytest.raises(LiveViewError) as exc:
                async with LiveView("127.0.0.2", live.port):
                    pass
            assert f"127.0.0.2:{live.port}" in str(exc.value) and "\n" not in str(exc.value)

    asyncio.run(main())


async def stuck_client(port):
    """A page that opens the WebSocket and then never reads a byte."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                 "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                 "Sec-WebSocket-Version: 13\r\n\r\n".encode())
    await writer.drain()
    return writer


def test_viewers_that_vanish_or_never_read_do_not_touch_the_trial(tmp_path):
    async def main():
        async with LiveView(port=0) as live:
            for k in range(150000):   # about 9 MB queued: more than the sockets hold
                live.publish(Link6(k, k, 1.0, 2.0, 0.0))
            stuck = await stuck_client(live.port)

            async def vanishing():
                await asyncio.sleep(0.5)
                ws = await connect(f"ws://127.0.0.1:{live.port}/ws", max_size=None)
                await take(ws, 600)
                ws.transport.abort()               # gone mid-trial, no closing handshake

            task = asyncio.create_task(vanishing())
            steering = SteeringConfig(heading=0.0, window=1.0)
            result, data, _, _ = await trial_with_emulator(
                tmp_path / "t.mcap", 3.0, nodes=3, mocap=True, viewers=[live],
                steering=steering)
            await task
            # the stuck page is still far behind: its connection waits, nothing else
            assert max(live.backlog()) > 10000, live.backlog()
            n_before_exit = len(live.records)
            t0 = time.monotonic()
        exit_s = time.monotonic() - t0
        stuck.close()
        return result, data, live, n_before_exit, exit_s

    result, data, live, n, exit_s = asyncio.run(main())
    st = result.stream
    assert result.reason == "completed" and st.missed == 0
    assert st.states_matched == 3 * st.periods and st.send_failures == 0
    assert st.jitter.percentile(50) < 0.005
    assert live.connections == 2 and live.disconnects >= 1
    kinds = [json.loads(r)["k"] for r in live.records[150000:n]]
    assert kinds[0] == "start" and kinds[-1] == "end" and "steer" in kinds
    assert kinds.count("exp") >= 40 and "status" in kinds
    assert exit_s < 4.0                      # linger 1 s + the stuck page's close timeout
    assert len(data.records["/steering"]) == 31


def test_foxglove_advertises_the_trial_and_sends_the_scene():
    from aiko.drivers.foxglove_view import FoxgloveView

    async def main():
        async with FoxgloveView(port=0) as fox:
            async with connect(f"ws://127.0.0.1:{fox.port}",
                               subprotocols=["foxglove.sdk.v1"]) as ws:
                info = json.loads(await asyncio.wait_for(ws.recv(), 5))
                assert info["op"] == "serverInfo"
                topics = {}
                while not {"/aiko/links", "/aiko/link6", "/aiko/steering"} <= set(topics):
                    msg = json.loads(await asyncio.wait_for(ws.recv(), 5))
                    if msg["op"] == "advertise":
                        topics.update({c["topic"]: c["id"] for c in msg["channels"]})
                await ws.send(json.dumps({"op": "subscribe", "subscriptions": [
                    {"id": 7, "channelId": topics["/aiko/link6"]},
                    {"id": 8, "channelId": topics["/aiko/links"]}]}))
                await asyncio.sleep(0.3)

                async def scene_after(message):
                    """Publish, then the next scene message (at most 10 a second)."""
                    await asyncio.sleep(0.15)
                    fox.publish(message)
                    while True:
                        m = await asyncio.wait_for(ws.recv(), 5)
                        if isinstance(m, bytes) and m[0] == 1:
                            sub = int.from_bytes(m[1:5], "little")
                            got.setdefault(sub, []).append(m[13:])
                            if sub == 8:
                                return len(m) - 13

                got = {}
                s1 = await scene_after(Link6(1.5, 3, 0.25, -0.5, 0.05))
                s2 = await scene_after(MocapLinks(1.5, 3, tuple(
                    (0.1 * i, -0.5, 0.05) for i in range(11))))
                s3 = await scene_after(ModelLink6(1.5, 0.3, -0.4, 0.05, 0.0, tuple(
                    (0.1 * i, 0.0, 0.05) for i in range(11))))
                fox.publish(ModelLink6(1.6, object(), -0.4, 0.05, 0.0))  # not JSON: dropped
                assert json.loads(got[7][0]) == {"t": 1.5, "frame": 3, "x": 0.25, "y": -0.5,
                                                 "z": 0.05, "occluded": False}
                # eleven spheres and a line more each time: the links seen, then the model's
                assert s2 - s1 > 11 * 60 and s3 - s2 > 11 * 60, (s1, s2, s3)
        return fox

    fox = asyncio.run(main())
    assert fox.published == 3 and fox.errors == 1


def test_the_live_page_gets_the_scenes_obstacles_with_the_start():
    from aiko.drivers.live import LiveView

    live = LiveView(port=0, pegs=[(0.5, 0.1, 0.05)], steps=[(1.0, 0.02), (1.5, 0.05)])
    live.publish(TrialStart(0.0, "lateral-undulation"))
    start = json.loads(live.records[-1])
    assert start["k"] == "start"
    assert start["pegs"] == [[0.5, 0.1, 0.05]]
    assert start["steps"] == [[1.0, 0.02], [1.5, 0.05]]


def test_foxglove_draws_the_scenes_obstacles():
    """Pegs and steps go out as the entity ``obstacles``: three cylinders and
    two cubes more than the same scene without them."""
    from aiko.drivers.foxglove_view import FoxgloveView

    async def first_scene(**obstacles):
        async with FoxgloveView(port=0, **obstacles) as fox:
            async with connect(f"ws://127.0.0.1:{fox.port}",
                               subprotocols=["foxglove.sdk.v1"]) as ws:
                await asyncio.wait_for(ws.recv(), 5)
                topics = {}
                while "/aiko/links" not in topics:
                    msg = json.loads(await asyncio.wait_for(ws.recv(), 5))
                    if msg["op"] == "advertise":
                        topics.update({c["topic"]: c["id"] for c in msg["channels"]})
                await ws.send(json.dumps({"op": "subscribe", "subscriptions": [
                    {"id": 8, "channelId": topics["/aiko/links"]}]}))
                await asyncio.sleep(0.3)
                fox.publish(Link6(1.0, 1, 0.2, 0.0, 0.05))
                while True:
                    m = await asyncio.wait_for(ws.recv(), 5)
                    if isinstance(m, bytes) and m[0] == 1:
                        return m[13:]

    bare = asyncio.run(first_scene())
    full = asyncio.run(first_scene(pegs=[(0.5, 0.1, 0.05), (1.0, -0.2, 0.02),
                                         (1.5, 0.0, 0.03)],
                                   steps=[(2.0, 0.02), (2.5, 0.04)]))
    assert b"obstacles" in full and b"obstacles" not in bare
    # each cylinder and cube carries a pose, a size and a colour: tens of bytes
    assert len(full) - len(bare) > 5 * 40


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def browser(tmp):
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        if os.environ.get("AIKO_REQUIRE_BROWSER"):
            pytest.fail("Chromium and chromedriver are required (Debian: chromium "
                        "chromium-driver)")
        pytest.skip("no Chromium here (.ci/run installs it and sets AIKO_REQUIRE_BROWSER)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--disable-background-networking", "--disable-component-update",
              "--disable-sync", "--no-first-run", f"--user-data-dir={tmp}",
              "--window-size=1400,1000"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def count_pixels(driver, canvas, test):
    """Pixels of a canvas whose RGBA (d[i] .. d[i + 3]) pass the JS ``test``."""
    return driver.execute_script(f"""
        const c = document.getElementById('{canvas}');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4)
            if ({test}) n++;
        return n;""")


def blue_pixels(driver, canvas):
    return count_pixels(driver, canvas,
                        "d[i + 3] > 200 && d[i + 2] > 120 && d[i] < 90 && d[i + 1] < 120")


def test_the_live_page_in_a_browser_during_a_trial_on_the_simulated_rig(tmp_path):
    run = subprocess.Popen(
        [*AIKO_COMMAND, "run", "lateral-undulation-orthotropic",
         "--duration", "5", "--heading", "20", "--live", "0", "--out",
         str(tmp_path / "live.mcap")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    driver = None
    try:
        url = None
        for line in run.stdout:
            if "live view: " in line:
                url = line.split("live view: ", 1)[1].strip()
                break
        assert url and url.startswith("http://127.0.0.1:"), url
        driver = browser(tempfile.mkdtemp(dir=tmp_path))
        driver.get(url)
        state = lambda: driver.execute_script(  # noqa: E731
            "return [document.body.dataset.state, aikoLive.exp.length, aikoLive.model.length,"
            " aikoLive.steer.length]")
        seen = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            seen.append(state())
            if seen[-1][0] not in ("connecting", "waiting", "running"):
                break
            time.sleep(0.5)
        running = [s for s in seen if s[0] == "running"]
        # drawn and updated while the trial ran: link 6 from motion capture and
        # from the model, the steering, more of each from one look to the next
        assert len(running) >= 4, seen
        assert running[-1][1] > running[0][1] > 0 or running[-1][1] > running[1][1] > 0, seen
        assert running[-1][2] > 0 and running[-1][3] > 0, seen
        assert seen[-1][0] == "completed", seen
        assert blue_pixels(driver, "path") > 200 and blue_pixels(driver, "xy") > 200
        assert "ended: completed" in driver.find_element("id", "banner").text
        assert "nodes ok 10/10" in driver.find_element("id", "status").text
        png = driver.get_screenshot_as_png()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20000
        (tmp_path / "live.png").write_bytes(png)
    finally:
        if driver is not None:
            driver.quit()
        out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    assert "steering (heading hold)" in out


class ServedInThread:
    """A LiveView served from its own event loop in a thread, for a browser."""

    def __init__(self):
        import threading
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.live = LiveView(port=0, linger=0.5)
        self.call(self.live.__aenter__())

    def call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def publish(self, message):
        self.loop.call_soon_threadsafe(self.live.publish, message)

    def close(self):
        self.call(self.live.__aexit__(None, None, None))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def wait_for_state(driver, states, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = driver.execute_script("return document.body.dataset.state")
        if state in states:
            return state
        time.sleep(0.1)
    return state


def test_the_page_tells_a_failed_trial_and_a_lost_connection_apart(tmp_path):
    driver = browser(tempfile.mkdtemp(dir=tmp_path))
    try:
        for ending in ("fault", "lost"):
            served = ServedInThread()
            served.publish(TrialStart(0.0, "sidewinding"))
            for k in range(40):
                served.publish(Link6(k / 20, k, 0.01 * k, 0.0, 0.05))
            driver.get(served.live.url)
            assert wait_for_state(driver, ("running",)) == "running"
            if ending == "fault":
                served.publish(TrialEnd(2.0, "fault", {
                    "kind": "lost_node", "node": 4, "reason": "joint node 4 lost: no heartbeat"}))
                assert wait_for_state(driver, ("fault",)) == "fault"
                banner = driver.find_element("id", "banner").text
                assert "fault" in banner and "joint node 4 lost" in banner
            served.close()
            if ending == "lost":   # the server went away without an end
                assert wait_for_state(driver, ("disconnected",)) == "disconnected"
                assert "lost" in driver.find_element("id", "banner").text
            else:                  # the end was received: closing does not change it
                time.sleep(0.5)
                assert driver.execute_script("return document.body.dataset.state") == "fault"
            assert driver.execute_script("return aikoLive.exp.length") == 40
    finally:
        driver.quit()


def olive_pixels(driver, canvas):
    """Pixels of the pegs' colour (#6b8e23) on a canvas."""
    return count_pixels(driver, canvas,
                        "d[i + 3] > 200 && Math.abs(d[i] - 107) < 8"
                        " && Math.abs(d[i + 1] - 142) < 8 && Math.abs(d[i + 2] - 35) < 8")


def test_the_page_draws_the_pegs_in_view(tmp_path):
    """Two pegs near the path (one 5 cm in radius, one 2 cm) and one far off:
    the discs' pixels are those of the two in view, to scale."""
    driver = browser(tempfile.mkdtemp(dir=tmp_path))
    served = None
    try:
        counts = []
        for pegs in ([], [(0.2, 0.1, 0.05), (0.3, -0.1, 0.02), (9.0, 9.0, 0.05)]):
            served = ServedInThread()
            served.live.pegs = [list(p) for p in pegs]
            served.publish(TrialStart(0.0, "sidewinding"))
            for k in range(40):
                served.publish(Link6(k / 20, k, 0.01 * k, 0.0, 0.05))
            driver.get(served.live.url)
            assert wait_for_state(driver, ("running",)) == "running"
            time.sleep(0.5)
            counts.append(olive_pixels(driver, "path"))
            served.close()
            served = None
        assert counts[0] == 0
        # the path's panel shows about 0.6 m across 590 px here (~1000 px/m): the two
        # discs cover pi (50^2 + 20^2) ~ 9100 px; most of them in the exact colour (the
        # path's line and the discs' anti-aliased rims aside); a peg drawn as a dot or not
        # at all gives a few dozen
        assert counts[1] > 3000
    finally:
        if served is not None:
            served.close()
        driver.quit()
