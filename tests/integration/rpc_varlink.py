"""Integration test of lib/rpc: the C test server (tests/rpc_test_server.c)
against the independent Python Varlink client in tests/varlink_peer.py, over
real Unix sockets in a temporary directory.

usage: rpc_varlink.py SERVER_BINARY SRCDIR
Exit 0 when everything ran and passed, 77 when every test was skipped.
"""
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

SERVER, SRCDIR = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SRCDIR, "tests"))
from varlink_peer import Closed, Connection, VarlinkError, wait_for_socket  # noqa: E402
import varlink_idl  # noqa: E402

MAX_REQUEST = 64 * 1024


class Server:
    """The test server on a socket in its own temporary directory."""

    def __init__(self, *args, activate=False):
        self.dir = tempfile.mkdtemp(prefix="wattprof-rpc-")
        os.chmod(self.dir, 0o755)  # reachable by the unprivileged peers
        self.path = os.path.join(self.dir, "test.sock")
        if activate:
            cmd = ["systemd-socket-activate", "-l", self.path, SERVER] + list(args)
        else:
            cmd = [SERVER, "--socket", self.path] + list(args)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        if activate:
            wait_for_socket(self.path)  # starts the server: its first connection
        else:
            # It listens before it says so; probing with a connection would
            # take a client slot until the server noticed the close.
            line = self.proc.stdout.readline()
            if line.strip() != "ready":
                raise AssertionError("server did not start: %r %s" %
                                     (line, self.proc.stderr.read()))
        self.stderr = ""

    def connect(self, timeout=10.0):
        return Connection(self.path, timeout)

    def wait_stat(self, key, value, timeout=20.0):
        """Waits until the server's counter reaches value; returns the time taken."""
        t0 = time.monotonic()
        with self.connect() as c:
            while c.call("io.wattprof.Test.Stats")[key] < value:
                if time.monotonic() - t0 > timeout:
                    raise AssertionError("%s stayed below %d for %.0f s" % (key, value, timeout))
                time.sleep(0.01)
        return time.monotonic() - t0

    def stop(self):
        """Stops the server; returns its counters from the last stderr line."""
        self.proc.terminate()
        out, self.stderr = self.proc.communicate(timeout=20)
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.proc.returncode != 0:
            raise AssertionError("server exited %d: %s" % (self.proc.returncode, self.stderr))
        last = [l for l in self.stderr.splitlines() if "accepted" in l][-1].split()
        return {last[i]: int(last[i + 1]) for i in range(1, len(last) - 1, 2)}


def expect_error(testcase, name, fn, *args):
    with testcase.assertRaises(VarlinkError) as cm:
        fn(*args)
    testcase.assertEqual(cm.exception.name, name)
    return cm.exception.parameters


def expect_closed(testcase, conn):
    """The server closes conn: reading gives EOF or a reset, never a message."""
    with testcase.assertRaises(Closed):
        conn.recv()


class Basics(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server()

    @classmethod
    def tearDownClass(cls):
        cls.stats = cls.srv.stop()

    def test_get_info(self):
        with self.srv.connect() as c:
            info = c.call("org.varlink.service.GetInfo")
        self.assertEqual(info["vendor"], "wattprof")
        self.assertEqual(info["product"], "rpc-test-server")
        self.assertEqual(info["version"], "1")
        self.assertIn("url", info)
        self.assertEqual(info["interfaces"],
                         ["org.varlink.service", "io.wattprof.Test", "io.wattprof.Monitor"])

    def test_interface_description_is_the_repository_file(self):
        with open(os.path.join(SRCDIR, "lib", "rpc", "io.wattprof.Monitor.varlink")) as f:
            want = f.read()
        with self.srv.connect() as c:
            got = c.call("org.varlink.service.GetInterfaceDescription",
                         {"interface": "io.wattprof.Monitor"})
            self.assertEqual(got["description"], want)
            svc = c.call("org.varlink.service.GetInterfaceDescription",
                         {"interface": "org.varlink.service"})
            self.assertIn("method GetInfo()", svc["description"])
            p = expect_error(self, "org.varlink.service.InterfaceNotFound", c.call,
                             "org.varlink.service.GetInterfaceDescription",
                             {"interface": "com.example.Nothing"})
            self.assertEqual(p, {"interface": "com.example.Nothing"})
            p = expect_error(self, "org.varlink.service.InvalidParameter", c.call,
                             "org.varlink.service.GetInterfaceDescription", {})
            self.assertEqual(p, {"parameter": "interface"})

    def test_unknown_methods(self):
        with self.srv.connect() as c:
            p = expect_error(self, "org.varlink.service.MethodNotFound", c.call,
                             "io.wattprof.Test.Nope")
            self.assertEqual(p, {"method": "io.wattprof.Test.Nope"})
            p = expect_error(self, "org.varlink.service.InterfaceNotFound", c.call,
                             "com.example.Other.Method")
            self.assertEqual(p, {"interface": "com.example.Other"})
            p = expect_error(self, "org.varlink.service.MethodNotImplemented", c.call,
                             "io.wattprof.Test.Declared")
            self.assertEqual(p, {"method": "io.wattprof.Test.Declared"})
            # The daemon's interface is declared here but not implemented.
            expect_error(self, "org.varlink.service.MethodNotImplemented", c.call,
                         "io.wattprof.Monitor.GetStatus")
            # The connection is still good after errors.
            self.assertEqual(c.call("io.wattprof.Test.Echo", {"text": "ok"})["text"], "ok")

    def test_bad_parameters(self):
        with self.srv.connect() as c:
            cases = [({"text": 5}, "text"), ({}, "text"), ({"text": "a", "extra": 1}, "extra"),
                     ({"text": "a", "repeat": "2"}, "repeat"), ({"text": None}, "text"),
                     ({"text": "a", "repeat": -1}, "repeat")]
            for params, field in cases:
                p = expect_error(self, "org.varlink.service.InvalidParameter", c.call,
                                 "io.wattprof.Test.Echo", params)
                self.assertEqual(p["parameter"], field, params)
            self.assertEqual(c.call("io.wattprof.Test.Echo", {"text": "b", "repeat": 3})["text"],
                             "bbb")

    def test_request_at_the_limit_is_served(self):
        # Pad the message to exactly MAX_REQUEST bytes before its NUL.
        head = '{"method":"io.wattprof.Test.Echo","parameters":{"text":"'
        tail = '"}}'
        text = "y" * (MAX_REQUEST - len(head) - len(tail))
        msg = (head + text + tail).encode()
        self.assertEqual(len(msg), MAX_REQUEST)
        with self.srv.connect() as c:
            c.send_raw(msg + b"\0")
            self.assertEqual(c.reply()["parameters"]["text"], text)

    def test_oversized_request(self):
        big = json.dumps({"method": "io.wattprof.Test.Echo",
                          "parameters": {"text": "z" * (MAX_REQUEST + 10)}}).encode() + b"\0"
        with self.srv.connect() as c:
            try:
                c.send_raw(big)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server may close before taking it all; the reply is still there
            msg = c.recv()
            self.assertEqual(msg["error"], "org.varlink.service.InvalidParameter")
            self.assertIn("larger than 65536", msg["parameters"]["reason"])
            expect_closed(self, c)
        # An unterminated flood is cut off at the limit as well.
        with self.srv.connect() as c:
            c.send_raw(b"{" + b" " * (MAX_REQUEST + 1))
            self.assertEqual(c.recv()["error"], "org.varlink.service.InvalidParameter")
            expect_closed(self, c)

    def test_malformed_messages(self):
        cases = [(b'{"method": "io.wattprof.Test.Echo", ', ""),
                 (b"not json", ""), (b"[1, 2]", ""), (b'{"parameters": {}}', "method"),
                 (b'{"method": 7}', "method"),
                 (b'{"method": "io.wattprof.Test.Echo", "parameters": []}', "parameters"),
                 (b'{"method": "io.wattprof.Test.Echo", "more": "yes"}', "more"),
                 (b'{"method": "a.B"} trailing', "")]
        for raw, field in cases:
            with self.srv.connect() as c:
                c.send_raw(raw + b"\0")
                msg = c.recv()
                self.assertEqual(msg["error"], "org.varlink.service.InvalidParameter", raw)
                self.assertEqual(msg["parameters"]["parameter"], field, raw)
                self.assertTrue(msg["parameters"]["reason"], raw)
                expect_closed(self, c)
        with self.srv.connect() as c:  # the server is fine
            c.call("org.varlink.service.GetInfo")

    def test_pipelined_calls_answer_in_order(self):
        with self.srv.connect() as c:
            msgs = b"".join(json.dumps({"method": "io.wattprof.Test.Echo",
                                        "parameters": {"text": str(i)}}).encode() + b"\0"
                            for i in range(50))
            c.send_raw(msgs)
            for i in range(50):
                self.assertEqual(c.reply()["parameters"]["text"], str(i))

    def test_oneway_gets_no_reply(self):
        with self.srv.connect() as c:
            c.send("io.wattprof.Test.Echo", {"text": "silent"}, oneway=True)
            self.assertEqual(c.call("io.wattprof.Test.Echo", {"text": "loud"})["text"], "loud")

    def test_half_closed_client_still_gets_its_reply(self):
        with self.srv.connect() as c:
            c.send("io.wattprof.Test.Echo", {"text": "bye"})
            c.sock.shutdown(socket.SHUT_WR)
            self.assertEqual(c.reply()["parameters"]["text"], "bye")
            expect_closed(self, c)

    def test_streaming_with_more(self):
        with self.srv.connect() as c:
            got = list(c.stream("io.wattprof.Test.Counter", {"count": 5, "interval_ms": 5}))
            self.assertEqual(got, [({"n": 1}, True), ({"n": 2}, True), ({"n": 3}, True),
                                   ({"n": 4}, True), ({"n": 5}, False)])
            # Calls pipelined behind a stream wait for it, then run in order.
            c.send("io.wattprof.Test.Counter", {"count": 3, "interval_ms": 20}, more=True)
            c.send("io.wattprof.Test.Echo", {"text": "after"})
            ns = [c.reply()["parameters"]["n"] for _ in range(3)]
            self.assertEqual(ns, [1, 2, 3])
            self.assertEqual(c.reply()["parameters"]["text"], "after")
            expect_error(self, "org.varlink.service.ExpectedMore", c.call,
                         "io.wattprof.Test.Counter", {"count": 2})

    def test_pending_calls_do_not_block_other_clients(self):
        with self.srv.connect() as slow, self.srv.connect() as fast:
            t0 = time.monotonic()
            slow.send("io.wattprof.Test.Slow", {"ms": 400})
            fast.call("io.wattprof.Test.Echo", {"text": "quick"})
            self.assertLess(time.monotonic() - t0, 0.3)
            slow.reply()
            self.assertGreaterEqual(time.monotonic() - t0, 0.39)

    def test_client_leaving_mid_stream(self):
        c = self.srv.connect()
        c.send("io.wattprof.Test.Counter", {"count": 1000000, "interval_ms": 1}, more=True)
        c.reply()
        c.close()
        time.sleep(0.1)
        with self.srv.connect() as d:
            d.call("org.varlink.service.GetInfo")

    def test_peer_credentials(self):
        with self.srv.connect() as c:
            me = c.call("io.wattprof.Test.Echo", {"text": ""})
        self.assertEqual((me["uid"], me["gid"], me["pid"]),
                         (os.getuid(), os.getgid(), os.getpid()))
        self.assertEqual(me["privileged"], os.getuid() == 0)


def run_as(uid, gid, groups, path, code):
    """Runs Python code as another user with setpriv; returns its JSON output."""
    helper = os.path.join(os.path.dirname(path), "varlink_peer.py")
    shutil.copy(os.path.join(SRCDIR, "tests", "varlink_peer.py"), helper)
    os.chmod(helper, 0o644)
    grp = ["--groups=" + ",".join(map(str, groups))] if groups else ["--clear-groups"]
    prog = ("import json, sys; sys.path.insert(0, %r); from varlink_peer import *\n" %
            os.path.dirname(path)) + code
    out = subprocess.run(["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid] + grp +
                         ["/usr/bin/python3", "-c", prog, path],
                         capture_output=True, text=True, timeout=30, cwd="/")
    if out.returncode != 0:
        raise AssertionError("peer as uid %d failed: %s" % (uid, out.stderr))
    return json.loads(out.stdout)


PEER_CODE = """
c = Connection(sys.argv[1])
me = c.call("io.wattprof.Test.Echo", {"text": "x"})
try:
    c.call("io.wattprof.Test.Privileged")
    me["allowed"] = True
except VarlinkError as e:
    me["allowed"] = e.name
print(json.dumps(me))
"""


class Unprivileged(unittest.TestCase):
    """Another uid through setpriv: needs root to switch users."""

    def setUp(self):
        if os.getuid() != 0:
            self.skipTest("needs root to run a peer as another uid with setpriv")
        if not shutil.which("setpriv"):
            self.skipTest("setpriv (util-linux) is not installed")
        self.srv = Server("--group", "nogroup")
        self.nogroup = 65534

    def tearDown(self):
        self.srv.stop()

    def test_other_uid_is_seen_and_unprivileged(self):
        me = run_as(65534, 100, [], self.srv.path, PEER_CODE)
        self.assertEqual(me["uid"], 65534)
        self.assertEqual(me["gid"], 100)
        self.assertFalse(me["privileged"])
        self.assertEqual(me["allowed"], "org.varlink.service.PermissionDenied")

    def test_member_of_the_group_is_privileged(self):
        # The configured group as a supplementary group only.
        me = run_as(65534, 100, [self.nogroup], self.srv.path, PEER_CODE)
        self.assertEqual(me["uid"], 65534)
        self.assertTrue(me["privileged"])
        self.assertTrue(me["allowed"])
        # And as the primary group.
        me = run_as(65534, self.nogroup, [], self.srv.path, PEER_CODE)
        self.assertTrue(me["privileged"])

    def test_root_is_privileged(self):
        with self.srv.connect() as c:
            self.assertTrue(c.call("io.wattprof.Test.Echo", {"text": ""})["privileged"])
            c.call("io.wattprof.Test.Privileged")


class Stalled(unittest.TestCase):
    """Clients that never read are dropped; the others are still served."""

    def setUp(self):
        self.srv = Server("--max-output", str(256 * 1024))

    def test_stalled_reader_is_dropped(self):
        stalled = self.srv.connect()
        calls = 64  # each reply about 32 KiB: 2 MiB in all, far past the bound
        try:
            for _ in range(calls):
                stalled.send("io.wattprof.Test.Echo", {"text": "s" * 1024, "repeat": 32})
        except (BrokenPipeError, ConnectionResetError):
            pass  # dropped already
        # Others are served promptly while the stalled one is still connected.
        t0 = time.monotonic()
        with self.srv.connect() as other:
            for _ in range(20):
                other.call("org.varlink.service.GetInfo")
        self.assertLess(time.monotonic() - t0, 2.0)
        self.srv.wait_stat("dropped", 1)
        got = 0
        try:
            while True:
                stalled.reply()
                got += 1
        except Closed:
            pass
        stalled.close()
        self.assertLess(got, calls)
        stats = self.srv.stop()
        self.assertEqual(stats["dropped"], 1)

    def test_one_reply_over_the_bound_reaches_a_reader(self):
        with self.srv.connect() as c:
            got = c.call("io.wattprof.Test.Echo", {"text": "b" * 1024, "repeat": 1024})
            self.assertEqual(len(got["text"]), 1024 * 1024)  # 4x the 256 KiB bound
            c.call("org.varlink.service.GetInfo")
        self.assertEqual(self.srv.stop()["dropped"], 0)

    def test_stalled_subscriber_is_dropped(self):
        stalled = self.srv.connect()
        stalled.send("io.wattprof.Test.Counter", {"count": 1000000, "interval_ms": 0}, more=True)
        with self.srv.connect() as other:
            for i in range(20):
                other.call("io.wattprof.Test.Echo", {"text": str(i)})
                time.sleep(0.02)
        self.srv.wait_stat("dropped", 1)
        got = 0
        try:
            while True:
                stalled.reply()
                got += 1
        except Closed:
            pass
        stalled.close()
        self.assertLess(got, 1000000)
        stats = self.srv.stop()
        self.assertEqual(stats["dropped"], 1)

    def tearDown(self):
        if self.srv.proc.returncode is None:
            self.srv.stop()


class MaxClients(unittest.TestCase):
    def setUp(self):
        self.srv = Server("--max-clients", "4")

    def tearDown(self):
        if self.srv.proc.returncode is None:
            self.srv.stop()

    def test_extra_clients_are_refused_and_slots_come_back(self):
        held = [self.srv.connect() for _ in range(4)]
        for c in held:
            c.call("io.wattprof.Test.Echo", {"text": "in"})
        extra = self.srv.connect()
        try:
            extra.send("org.varlink.service.GetInfo")
        except (BrokenPipeError, ConnectionResetError):
            pass
        expect_closed(self, extra)
        extra.close()
        held.pop().close()
        # The server sees the close asynchronously; the slot returns soon.
        end = time.monotonic() + 5
        while True:
            try:
                with self.srv.connect() as c:
                    c.call("org.varlink.service.GetInfo")
                break
            except (Closed, BrokenPipeError, ConnectionResetError):
                if time.monotonic() > end:
                    raise
                time.sleep(0.05)
        for c in held:
            self.assertEqual(c.call("io.wattprof.Test.Echo", {"text": "still"})["text"], "still")
            c.close()
        stats = self.srv.stop()
        self.assertGreaterEqual(stats["refused"], 1)

    def test_two_hundred_clients_at_once(self):
        conns, errors = [], []

        def client():
            try:
                with self.srv.connect() as c:
                    c.call("io.wattprof.Test.Echo", {"text": "crowd"})
                    conns.append(1)
            except (Closed, BrokenPipeError, ConnectionResetError):
                errors.append(1)

        threads = [threading.Thread(target=client) for _ in range(200)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        self.assertEqual(len(conns) + len(errors), 200)
        self.assertGreaterEqual(len(conns), 4)
        with self.srv.connect() as c:
            c.call("org.varlink.service.GetInfo")
        stats = self.srv.stop()
        self.assertEqual(stats["refused"], len(errors))


class MutatedMessages(unittest.TestCase):
    """Seeded random corruptions of valid calls: every one gets Varlink
    messages or a close, never a hang or a crash (ASan watches the server
    in the sanitizer build)."""

    SEEDS = [b'{"method":"io.wattprof.Test.Echo","parameters":{"text":"abc","repeat":2}}',
             b'{"method":"io.wattprof.Test.Counter","parameters":{"count":3,"interval_ms":0},'
             b'"more":true}',
             b'{"method":"org.varlink.service.GetInterfaceDescription",'
             b'"parameters":{"interface":"io.wattprof.Test"}}']

    def mutate(self, rng, msg):
        b = bytearray(msg)
        for _ in range(rng.randint(1, 4)):
            if not b:
                break
            op, i = rng.randrange(4), rng.randrange(len(b))
            if op == 0:
                b[i] = rng.randrange(256)
            elif op == 1:
                b.insert(i, rng.choice(b'{}[]",:\\0 \x00\xff'))
            elif op == 2 and len(b) > 1:
                del b[i]
            else:
                b = b[:i]
        return bytes(b)

    def test_mutated_calls(self):
        srv = Server()
        rng = random.Random(20261130)
        try:
            for n in range(400):
                raw = self.mutate(rng, rng.choice(self.SEEDS))
                with srv.connect(timeout=5) as c:
                    c.send_raw(raw + b"\0")
                    c.sock.shutdown(socket.SHUT_WR)
                    msgs = []
                    try:
                        while True:
                            msgs.append(c.recv())
                    except Closed:
                        pass
                    except json.JSONDecodeError as e:
                        self.fail("case %d %r: reply is not JSON: %s" % (n, raw, e))
                for m in msgs:
                    self.assertIsInstance(m, dict, raw)
                    self.assertTrue("error" in m or "parameters" in m, (raw, m))
            with srv.connect() as c:
                c.call("org.varlink.service.GetInfo")
        finally:
            stats = srv.stop()
        self.assertGreater(stats["bad_requests"], 0)


class InterfaceDefinitions(unittest.TestCase):
    """The definitions parse under an independent, strict IDL parser."""

    def test_monitor_definition(self):
        with open(os.path.join(SRCDIR, "lib", "rpc", "io.wattprof.Monitor.varlink")) as f:
            idl = varlink_idl.parse(f.read())
        self.assertEqual(idl["name"], "io.wattprof.Monitor")
        self.assertEqual(sorted(idl["methods"]),
                         sorted(["GetStatus", "ListProcesses", "GetProcess", "GetHistory",
                                 "Subscribe", "ListJobs", "ListModels", "ReloadModels"]))
        self.assertIn("NoSuchProcess", idl["errors"])
        self.assertEqual(idl["methods"]["GetProcess"][0], "(pid: int, series_s: ?float)")
        # Replies name a process's batch job (daemon_jobs checks it in
        # real replies).
        self.assertTrue(idl["types"]["Process"].endswith(", job: ?string)"),
                        idl["types"]["Process"])

    def test_every_served_definition_parses(self):
        srv = Server()
        try:
            with srv.connect() as c:
                for name in c.call("org.varlink.service.GetInfo")["interfaces"]:
                    text = c.call("org.varlink.service.GetInterfaceDescription",
                                  {"interface": name})["description"]
                    self.assertEqual(varlink_idl.parse(text)["name"], name)
        finally:
            srv.stop()

    def test_parser_rejects_broken_definitions(self):
        cases = ["interface a.b\nmethod X(a: Undefined) -> ()",
                 "interface a.b\nmethod X(a: ??int) -> ()",
                 "interface a.b\nmethod X(a: int -> ()",
                 "interface a.b\nmethod X(a: int, a: int) -> ()",
                 "interface a.b\nmethod X() -> ()\nerror X ()",
                 "interface a.b\nmethod x() -> ()",
                 "interface ab\nmethod X() -> ()",
                 "interface a.b\n"]
        for text in cases:
            with self.assertRaises(varlink_idl.IdlError, msg=text):
                varlink_idl.parse(text)


class SocketActivation(unittest.TestCase):
    def test_activated_socket(self):
        if not shutil.which("systemd-socket-activate"):
            self.skipTest("systemd-socket-activate is not installed")
        srv = Server(activate=True)
        try:
            with srv.connect() as c:
                info = c.call("org.varlink.service.GetInfo")
                self.assertEqual(info["product"], "rpc-test-server")
        finally:
            srv.stop()


if __name__ == "__main__":
    result = unittest.main(argv=[sys.argv[0], "-v"], exit=False).result
    if not result.wasSuccessful():
        sys.exit(1)
    if result.testsRun == len(result.skipped):
        sys.exit(77)
    for test, reason in result.skipped:
        print("SKIPPED %s: %s" % (test.id(), reason))
