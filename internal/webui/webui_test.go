package webui

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func TestHandlerServesThePage(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	tests := []struct {
		path, contentType, contains string
	}{
		{"/", "text/html; charset=utf-8", `<script type="module" src="app.js"></script>`},
		{"/app.js", "text/javascript; charset=utf-8", "import { Client, refusedByBackend } from './scalechat.js';"},
		{"/scalechat.js", "text/javascript; charset=utf-8", "new this.WS("}, // the client of clients/js
		{"/style.css", "text/css; charset=utf-8", ".state[data-state=\"connected\"]"},
	}
	for _, tt := range tests {
		resp, err := http.Get(srv.URL + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != tt.contentType || !strings.Contains(string(body), tt.contains) {
			t.Errorf("GET %s: %d %q, body has %q: %v", tt.path, resp.StatusCode, resp.Header.Get("Content-Type"), tt.contains, strings.Contains(string(body), tt.contains))
		}
	}
}

// TestAssetsStayLocal checks that the page loads nothing from the internet
// and never turns text into HTML.
func TestAssetsStayLocal(t *testing.T) {
	external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|@import|url\(\s*["']?(https?:)?//`)
	unsafeDOM := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function`)
	err := fs.WalkDir(static, "static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(path)
		if err != nil {
			return err
		}
		if m := external.Find(b); m != nil {
			t.Errorf("%s loads from elsewhere: %q", path, m)
		}
		if strings.HasSuffix(path, ".js") {
			if m := unsafeDOM.Find(b); m != nil {
				t.Errorf("%s uses %q", path, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
