// Starts headless Chromium for end-to-end tests of the
// pages scalechat serves or writes (chat page, dashboard, report).

package testsupport

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// BrowserPath returns the Chromium binary, or "" when none is installed.
func BrowserPath() string {
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	return ""
}

// NewBrowser returns the context of a fresh headless browser (its own profile in a
// temporary folder) that is shut down when the test ends. Without Chromium
// the test is skipped, or fails when the CI variable is set: CI installs it.
// Every browser gets at most timeout overall.
func NewBrowser(t testing.TB, timeout time.Duration) context.Context {
	t.Helper()
	path := BrowserPath()
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("Chromium is not installed (apt-get install chromium)")
		}
		t.Skip("Chromium is not installed (apt-get install chromium)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true), // CI runs as root
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		// The machine has no network beyond loopback: keep Chromium from trying.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	}
	ctx, cancelTimeout := context.WithTimeout(context.Background(), timeout)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		cancelTimeout()
	})
	if err := chromedp.Do(browserCtx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return browserCtx
}

// NewBrowserTab opens another tab of the browser of ctx, closed when the test ends.
func NewBrowserTab(t testing.TB, ctx context.Context) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(ctx)
	t.Cleanup(cancel)
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("open tab: %v", err)
	}
	return tab
}

// BrowserDo runs actions in tab, failing the test on an error or after 30 s.
func BrowserDo(t testing.TB, tab context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// WaitJS waits until the JavaScript expression expr is truthy in tab,
// checking it again at each change of the page's DOM, for at most timeout.
func WaitJS(tab context.Context, timeout time.Duration, expr string) error {
	ctx, cancel := context.WithTimeout(tab, timeout)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(0)))
	return err
}
