"""An independent Varlink client in plain Python (stdlib socket and json only).

It shares no code with lib/rpc: it frames messages itself (JSON object,
NUL byte), so tests that talk to the C server through it check the wire
protocol, not the library against itself.  Used by the integration tests of
lib/rpc and of wattprofd.
"""
import json
import socket
import time


class VarlinkError(Exception):
    """An error reply: .name is the error, .parameters its parameters."""

    def __init__(self, name, parameters):
        super().__init__("%s %s" % (name, json.dumps(parameters)))
        self.name = name
        self.parameters = parameters


class Closed(Exception):
    """The server closed the connection (EOF or reset) before a whole reply."""


class Connection:
    def __init__(self, path, timeout=10.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(path)
        except OSError:
            self.sock.close()
            raise
        self.buf = b""

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, method, parameters=None, more=False, oneway=False):
        msg = {"method": method}
        if parameters is not None:
            msg["parameters"] = parameters
        if more:
            msg["more"] = True
        if oneway:
            msg["oneway"] = True
        self.send_raw(json.dumps(msg).encode() + b"\0")

    def recv(self):
        """The next message as a dict; raises Closed at EOF or reset."""
        while b"\0" not in self.buf:
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError as e:
                raise Closed("connection reset") from e
            if not chunk:
                raise Closed("end of stream after %d bytes of a message" % len(self.buf))
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def reply(self):
        """The next reply's parameters, raising VarlinkError for an error."""
        msg = self.recv()
        if "error" in msg:
            raise VarlinkError(msg["error"], msg.get("parameters", {}))
        return msg

    def call(self, method, parameters=None):
        self.send(method, parameters)
        msg = self.reply()
        if msg.get("continues"):
            raise AssertionError("a plain call got a reply with continues")
        return msg.get("parameters", {})

    def stream(self, method, parameters=None):
        """Yields (parameters, continues) for each reply of a "more" call."""
        self.send(method, parameters, more=True)
        while True:
            msg = self.reply()
            yield msg.get("parameters", {}), bool(msg.get("continues"))
            if not msg.get("continues"):
                return


def wait_for_socket(path, timeout=10.0):
    """Waits until a server accepts on path."""
    end = time.monotonic() + timeout
    while True:
        try:
            with Connection(path, timeout=1.0):
                return
        except (FileNotFoundError, ConnectionRefusedError):
            if time.monotonic() > end:
                raise
            time.sleep(0.02)
