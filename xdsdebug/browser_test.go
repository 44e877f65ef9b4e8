package xdsdebug_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The page is tested in a real browser, Debian's chromium package, driven
// by its command line (--headless --screenshot, --dump-dom) so that no Go
// dependency is needed for it. .ci/run installs it and sets
// GOXDS_REQUIRE_BROWSER=1, under which a missing browser fails the tests;
// elsewhere they are skipped, saying what to install.

// requireBrowserEnv makes a missing browser a failure rather than a skip.
const requireBrowserEnv = "GOXDS_REQUIRE_BROWSER"

// browserTimeout bounds one run of the browser. Generous: a cold start on
// a loaded machine takes seconds.
const browserTimeout = 3 * time.Minute

// browser finds chromium: $GOXDS_CHROMIUM, or chromium (Debian) or
// chromium-browser on the PATH.
func browser(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("GOXDS_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on the PATH: the browser tests of the debug page need Debian's chromium package (apt-get install -y chromium), or GOXDS_CHROMIUM naming a Chromium binary"
	if os.Getenv(requireBrowserEnv) != "" {
		t.Fatalf("%s (%s is set, so this fails instead of skipping)", msg, requireBrowserEnv)
	}
	t.Skip(msg)
	return ""
}

// runBrowser runs headless chromium with args and the page's URL, and
// returns its standard output and how long it ran.
func runBrowser(t *testing.T, bin string, url string, args ...string) ([]byte, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), browserTimeout)
	defer cancel()
	all := []string{
		"--headless", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
		"--disable-extensions", "--disable-background-networking", "--disable-sync", "--mute-audio", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir(),
	}
	if os.Geteuid() == 0 {
		all = append(all, "--no-sandbox") // Chromium refuses to run as root with its sandbox
	}
	all = append(append(all, args...), url)
	cmd := exec.CommandContext(ctx, bin, all...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("chromium %s: %v after %v\nstderr:\n%s", strings.Join(args, " "), err, took, stderr.String())
	}
	return stdout.Bytes(), took
}

// render has chromium render url in a window of w×h pixels, and returns
// the screenshot, the DOM it built, serialized, and how long chromium ran,
// start to exit (one run does both: a start takes seconds).
func render(t *testing.T, bin, url string, w, h int) (image.Image, string, time.Duration) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "page.png")
	dom, took := runBrowser(t, bin, url, "--dump-dom", "--screenshot="+path, fmt.Sprintf("--window-size=%d,%d", w, h))
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("chromium wrote no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the screenshot is no PNG: %v", err)
	}
	if dir := os.Getenv("GOXDS_SCREENSHOT_DIR"); dir != "" {
		// For a person to look at: GOXDS_SCREENSHOT_DIR=/tmp go test ...
		b, _ := os.ReadFile(path)
		name := strings.NewReplacer("/", "_", "?", "_", "&", "_", "=", "-").Replace(t.Name() + url[strings.Index(url, "/debug/xds"):])
		os.WriteFile(filepath.Join(dir, name+".png"), b, 0o644)
	}
	return img, string(dom), took
}

// looks summarizes what a screenshot shows: what share of its pixels is
// ink (clearly darker than the white page), how many separate bands of
// rows hold ink in the page's body (lines of text and table rows), and
// how many pixels are of the page's red (errors) and green (healthy).
type looks struct {
	ink        float64
	textBands  int
	red, green int
	headerDark float64 // share of dark pixels in the header strip
}

func lookAt(img image.Image) looks {
	var l looks
	b := img.Bounds()
	var inked, total, headerDark, headerTotal int
	inBand := false
	for y := b.Min.Y; y < b.Max.Y; y++ {
		rowInk := 0
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			lum := (299*r + 587*g + 114*bl) / 1000
			total++
			if y < b.Min.Y+30 {
				headerTotal++
				if lum < 80 {
					headerDark++
				}
				continue
			}
			if lum < 160 {
				inked++
				rowInk++
			}
			switch {
			case r > 130 && g < 60 && bl < 60:
				l.red++
			case g > 90 && r < 40 && bl < 40:
				l.green++
			}
		}
		if y >= b.Min.Y+40 {
			if rowInk > 0 && !inBand {
				l.textBands++
			}
			inBand = rowInk > 0
		}
	}
	l.ink = float64(inked) / float64(total)
	l.headerDark = float64(headerDark) / float64(max(headerTotal, 1))
	return l
}
