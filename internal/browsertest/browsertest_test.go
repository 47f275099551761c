package browsertest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

func TestNew(t *testing.T) {
	p := filepath.Join(t.TempDir(), "page.html")
	if err := os.WriteFile(p, []byte(`<!DOCTYPE html><title>ok</title><p id="x">hello</p><script>document.title = "from js"</script>`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(New(t), 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+p)); err != nil {
		t.Fatal(err)
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text("#x"))
	if err != nil {
		t.Fatal(err)
	}
	if title != "from js" || text != "hello" {
		t.Errorf("title %q text %q", title, text)
	}
}
