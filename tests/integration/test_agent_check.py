"""agent_check (HAProxy's agent-check): a small agent in the harness speaks the protocol over TCP.

Three real backends; b1 has an agent (a thread-served socket on 127.0.0.1 whose answer the test
changes), b2's agent port refuses connections, b0 has its agent turned off. Every answer is seen
in /api/pools (the backend's "agent" object) and in routing within about one interval (200 ms):
- `drain`, `maint`, `down` take b1 out: its keys go to their next backend (no other key moves),
  real requests for them are served elsewhere; `ready` (after drain/maint) and `up` (after down)
  bring them back; `up` does not undo the agent's drain;
- `50%` halves b1's effective weight and moves no key; `75%, drain` is both;
- the agent's drain and the operator's drain are two reasons: the operator's ready leaves the
  agent's drain in place;
- a garbage answer, and an agent that refuses connections, change nothing;
- a reload keeps the agent's state; one that turns b1's agent off clears it.
The agent reads the `send` string first.
"""
import json
import os
import threading
import time

from harness import (Backend, ConnBackend, RondelTestCase, http_get, http_request, main,
                     make_config, metric_sum, scrape, unused_port, wait_until)

INTERVAL_S = 0.2
# "Within about one interval": the first check after the change answers; allow the checks' own
# timing, the admin poll and a loaded machine.
SEEN_WITHIN_S = 3.0


class Agent(ConnBackend):
    """An agent: reads one line (the `send` string), answers self.answer plus a newline, closes."""

    def __init__(self, answer):
        self.answer = answer
        self.sent = []
        self.lock = threading.Lock()
        super().__init__(self._serve, timeout=2)

    def say(self, answer):
        with self.lock:
            self.answer = answer

    def _serve(self, c):
        buf = b""
        while not buf.endswith(b"\n") and len(buf) < 256:
            chunk = c.recv(256)
            if not chunk:
                break
            buf += chunk
        with self.lock:
            self.sent.append(buf)
            answer = self.answer
        c.sendall(answer.encode() + b"\n")


class AgentCheck(RondelTestCase):
    use_dir = True
    @classmethod
    def start_backends(cls):
        cls.agent = Agent("up ready 100%")
        cls.closed_port = unused_port()
        return [Backend("b0"), Backend("b1"), Backend("b2"), cls.agent]

    @classmethod
    def config(cls, b1_agent=None):
        b0, b1, b2 = cls.backends[:3]
        entries = [
            {"address": b0.address, "agent_check": "{ enabled: false }"},
            {"address": b1.address, **({"agent_check": b1_agent} if b1_agent else {})},
            {"address": b2.address, "agent_check": f"{{ port: {cls.closed_port} }}"},
        ]
        pool = {"agent_check": f'{{ port: {cls.agent.port}, interval: 200ms, timeout: 500ms, '
                               f'send: "hello\\n" }}',
                "hot_keys": "{ share: 0 }", "spill_memory": 0}
        token_file = os.path.join(cls.dir, "token")
        with open(token_file, "w") as f:
            f.write("secret\n")
        return make_config(entries, pool=pool, admin={"token_file": token_file})

    def backend(self, b):
        for e in self.rondel.pools()["pools"][0]["backends"]:
            if e["id"] == b.address:
                return e
        raise AssertionError(b.address)

    def wait_agent(self, b, state, percent, last=None):
        t0 = time.monotonic()

        def seen():
            a = self.backend(b)["agent"]
            return (a["state"] == state and a["weight_percent"] == percent and
                    (last is None or a["last"] == last))

        wait_until(seen, timeout=SEEN_WITHIN_S, interval=0.02,
                   what=f"agent state {state} {percent}%: {self.backend(b)['agent']}")
        return time.monotonic() - t0

    def owners(self, keys):
        return {k: self.rondel.route("p", k)["chosen"] for k in keys}

    def served_by(self, key):
        status, headers, _ = http_get(self.port, key)
        self.assertEqual(status, 200)
        return headers["x-backend"]

    def test_answers_seen_in_api_and_routing(self):
        b1 = self.backends[1]
        self.agent.say("up ready 100%")
        self.wait_agent(b1, "up", 100, last="up ready 100%")
        keys = [f"/agent/{i}" for i in range(300)]
        home = self.owners(keys)
        own = [k for k in keys if home[k] == b1.address]
        self.assertGreater(len(own), 30)

        def check_out():
            now = self.owners(keys)
            for k in keys:
                if k in own:
                    self.assertNotEqual(now[k], b1.address, k)
                else:
                    self.assertEqual(now[k], home[k], k)  # no other key moves
            for k in own[:10]:
                self.assertNotEqual(self.served_by(k), "b1")

        def check_back():
            self.assertEqual(self.owners(keys), home)
            for k in own[:5]:
                self.assertEqual(self.served_by(k), "b1")

        for out_word, state, back_word in (("drain", "drain", "ready"),
                                           ("maint", "maint", "ready"),
                                           ("down#disk full", "down", "up")):
            self.agent.say(out_word)
            took = self.wait_agent(b1, state, 100, last=out_word)
            self.assertLess(took, SEEN_WITHIN_S)
            e = self.backend(b1)
            self.assertEqual(e["admin_state"], "ready")  # the operator's state is untouched
            self.assertEqual(e["state"], "down" if state == "down" else "up")
            check_out()
            self.agent.say(back_word)
            self.wait_agent(b1, "up", 100, last=back_word)
            check_back()

        # `up` does not undo the agent's drain; `ready` does.
        self.agent.say("drain")
        self.wait_agent(b1, "drain", 100)
        self.agent.say("up")
        self.wait_agent(b1, "drain", 100, last="up")
        check_out()
        self.agent.say("ready")
        self.wait_agent(b1, "up", 100)

        # A weight percentage: capacity only, no key moves.
        self.agent.say("50%")
        self.wait_agent(b1, "up", 50)
        self.assertAlmostEqual(self.backend(b1)["effective_weight"], 0.5)
        check_back()
        self.agent.say("75%, drain")
        self.wait_agent(b1, "drain", 75)
        self.assertAlmostEqual(self.backend(b1)["effective_weight"], 0.75)
        check_out()
        self.agent.say("ready 100%")
        self.wait_agent(b1, "up", 100)
        self.assertAlmostEqual(self.backend(b1)["effective_weight"], 1.0)
        check_back()

        # The agent read the send string on each check.
        self.assertIn(b"hello\n", self.agent.sent)

        # Metrics.
        _, samples, _ = scrape(self.rondel.admin_port)
        labels = {"pool": "p", "backend": b1.address}
        self.assertGreater(metric_sum(samples, "rondel_backend_agent_checks_total",
                                      result="ok", **labels), 10)
        self.assertEqual(metric_sum(samples, "rondel_backend_agent_state", state="up", **labels), 1)
        self.assertEqual(metric_sum(samples, "rondel_backend_agent_state", **labels), 1)
        self.assertEqual(metric_sum(samples, "rondel_backend_agent_weight_percent", **labels), 100)

    def test_operator_and_agent_drain_are_two_reasons(self):
        b1 = self.backends[1]
        url = f"/api/pools/p/backends/{b1.address}"
        auth = {"Authorization": "Bearer secret", "Content-Type": "application/json"}
        self.agent.say("drain")
        self.wait_agent(b1, "drain", 100)
        status, _, body = http_request(self.rondel.admin_port, "PUT", url, headers=auth,
                                       body=json.dumps({"state": "drain"}).encode())
        self.assertEqual(status, 200, body)
        status, _, body = http_request(self.rondel.admin_port, "PUT", url, headers=auth,
                                       body=json.dumps({"state": "ready"}).encode())
        self.assertEqual(status, 200, body)
        # The operator's ready: the agent's drain still holds.
        time.sleep(2 * INTERVAL_S)
        key = next(k for k in (f"/two/{i}" for i in range(500))
                   if self.rondel.route("p", k)["owner"] == b1.address)
        self.assertNotEqual(self.rondel.route("p", key)["chosen"], b1.address)
        self.assertEqual(self.backend(b1)["admin_state"], "ready")
        self.agent.say("ready")
        self.wait_agent(b1, "up", 100)
        wait_until(lambda: self.rondel.route("p", key)["chosen"] == b1.address, timeout=2,
                   what="its key back")

    def test_garbage_and_refused_agents_change_nothing(self):
        b1, b2 = self.backends[1], self.backends[2]
        self.agent.say("drain")
        self.wait_agent(b1, "drain", 100)
        self.agent.say("HTTP/1.1 200 OK")
        wait_until(lambda: self.backend(b1)["agent"]["last"] == "HTTP/1.1 200 OK",
                   timeout=SEEN_WITHIN_S, interval=0.02, what="the garbage answer read")
        a = self.backend(b1)["agent"]
        self.assertEqual((a["state"], a["weight_percent"], a["ok"]), ("drain", 100, False))
        self.assertGreater(a["checks_ignored"], 0)
        self.agent.say("ready")
        self.wait_agent(b1, "up", 100)

        # b2's agent port refuses: its checks fail, it stays in rotation with no agent state.
        wait_until(lambda: self.backend(b2)["agent"]["checks_failed"] >= 3, timeout=SEEN_WITHIN_S,
                   what="refused agent checks counted")
        a = self.backend(b2)["agent"]
        self.assertEqual((a["state"], a["weight_percent"], a["ok"]), ("none", 100, False))
        self.assertTrue(a["error"].startswith("connect_"), a)
        self.assertEqual(self.backend(b2)["state"], "up")
        key = next(k for k in (f"/ref/{i}" for i in range(500))
                   if self.rondel.route("p", k)["owner"] == b2.address)
        self.assertEqual(self.served_by(key), "b2")
        # b0's agent is off.
        a = self.backend(self.backends[0])["agent"]
        self.assertEqual((a["enabled"], a["state"], a["checks_failed"]), (False, "none", 0))

    def test_z_reload_turning_the_agent_off_clears_its_state(self):
        # Runs last (name order): it leaves b1 without an agent.
        b1 = self.backends[1]
        self.agent.say("drain 50%")
        self.wait_agent(b1, "drain", 50)
        self.rondel.reload(self.config())  # the same agent: its state is kept
        a = self.backend(b1)["agent"]
        self.assertEqual((a["state"], a["weight_percent"]), ("drain", 50))
        self.rondel.reload(self.config(b1_agent="{ enabled: false }"))
        e = self.backend(b1)
        self.assertEqual((e["agent"]["enabled"], e["agent"]["state"],
                          e["agent"]["weight_percent"]), (False, "none", 100))
        self.assertEqual(e["effective_weight"], 1.0)
        key = next(k for k in (f"/off/{i}" for i in range(500))
                   if self.rondel.route("p", k)["owner"] == b1.address)
        self.assertEqual(self.rondel.route("p", key)["chosen"], b1.address)
        self.assertEqual(self.served_by(key), "b1")


if __name__ == "__main__":
    main()
