package broker

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"io/fs"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/scalechat/scalechat/internal/testsupport"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// luaSources returns every script under lua/, by file name.
func luaSources(t *testing.T) map[string]string {
	t.Helper()
	names, err := fs.Glob(luaFiles, "lua/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("no script under lua/")
	}
	src := make(map[string]string, len(names))
	for _, n := range names {
		b, err := luaFiles.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		src[n] = string(b)
	}
	return src
}

func sha1Hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// TestEveryScriptIsLoaded pins that each file under lua/ is one of the
// scripts loadScripts loads, and that loadScripts loads nothing else: a
// script missing from the list would fail its first pipelined EVALSHA with
// NOSCRIPT.
func TestEveryScriptIsLoaded(t *testing.T) {
	loaded := map[string]int{}
	for _, s := range scripts {
		loaded[s.Hash()]++
	}
	for name, src := range luaSources(t) {
		switch n := loaded[sha1Hex(src)]; n {
		case 0:
			t.Errorf("%s is not among the scripts loadScripts loads", name)
		case 1:
		default:
			t.Errorf("%s is listed %d times", name, n)
		}
		delete(loaded, sha1Hex(src))
	}
	for h := range loaded {
		t.Errorf("script %s is loaded but has no file under lua/", h)
	}
	for name, s := range map[string]*redis.Script{
		"persist": persistScript, "release": releaseScript, "takeover": takeoverScript,
		"stream": streamScript, "presence": presenceScript, "handover": handoverScript,
	} {
		if s.Hash() != sha1Hex(mustRead(t, "lua/"+name+".lua")) {
			t.Errorf("%sScript is not lua/%s.lua", name, name)
		}
	}
}

func mustRead(t *testing.T, name string) string {
	t.Helper()
	b, err := luaFiles.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRedisAcceptsEveryScript loads the scripts into a real redis-server:
// SCRIPT LOAD compiles each one, so a syntax error fails here, not on the
// first message; and after loadScripts, Redis knows every file's script.
func TestRedisAcceptsEveryScript(t *testing.T) {
	rs := testsupport.StartRedis(t)
	opts, err := redis.ParseURL(rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srcs := luaSources(t)
	var hashes []string
	var names []string
	for name, src := range srcs {
		hashes = append(hashes, sha1Hex(src))
		names = append(names, name)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := loadScripts(ctx, rdb); err != nil {
		t.Fatalf("loadScripts: %v", err)
	}
	exists, err := rdb.ScriptExists(ctx, hashes...).Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range exists {
		if !ok {
			t.Errorf("%s: not in Redis after loadScripts", names[i])
		}
	}
	for name, src := range srcs {
		sha, err := rdb.ScriptLoad(ctx, src).Result()
		switch {
		case err != nil:
			t.Errorf("%s: redis-server refused it: %v", name, err)
		case sha != sha1Hex(src):
			t.Errorf("%s: Redis named it %s, not %s", name, sha, sha1Hex(src))
		}
	}
}
