// Package browsertest starts headless Chromium for tests, through
// github.com/chromedp/chromedp, with the flags that work on the project's
// machines.
package browsertest

import (
	"context"
	"os"
	"testing"

	"github.com/chromedp/chromedp"
)

// ChromiumPath is where the tests expect Chromium.
const ChromiumPath = "/usr/bin/chromium"

// New starts a headless Chromium with a fresh user-data-dir and returns a
// chromedp browser context for it; the browser is closed by t.Cleanup. The
// test is skipped when Chromium is missing, unless the environment
// variable CI is set, where it fails: CI installs Chromium.
//
// Bound each use with a timeout, e.g.
//
//	ctx, cancel := context.WithTimeout(browsertest.New(t), 30*time.Second)
//	defer cancel()
//	err := chromedp.Do(ctx, chromedp.Navigate(url))
//	title, err := chromedp.Run(ctx, chromedp.Title())
func New(t testing.TB) context.Context {
	t.Helper()
	if _, err := os.Stat(ChromiumPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("browsertest: %s is required in CI: %v", ChromiumPath, err)
		}
		t.Skipf("browsertest: %s not found: skipping", ChromiumPath)
	}
	dir := t.TempDir() // made before the Cleanup below, so removed after the browser exits
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(ChromiumPath),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(dir),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
	})
	// Start the browser now, so that a broken install fails here.
	// No timeout on this first call: it would bound the browser's life.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("browsertest: start %s: %v", ChromiumPath, err)
	}
	return ctx
}
