// Package testsupport is what the tests of scalechat share: real servers
// on loopback ports (in-process, or scalechat processes behind HAProxy or
// nginx), a real redis-server, a real socket.io server (deploy/socketio),
// headless Chromium, a TCP proxy that cuts
// connections, a blocking WebSocket client built on gobwas/ws (an
// implementation independent of the server's), free ports, and a wait for
// conditions that send no signal.
package testsupport
