#!/bin/sh
# lib/rpc against an independent Varlink client: the Python peer in
# tests/varlink_peer.py drives tests/rpc_test_server.c over real sockets.
set -eu
exec "$PYTHON" "$SRCDIR/tests/integration/rpc_varlink.py" "$BUILDDIR/tests/rpc-test-server" "$SRCDIR"
