package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetd-dev/fleetd/internal/console"
)

// uiOptions are `fleetd ui`'s.
type uiOptions struct {
	ioStreams
	serverOptions
	noOpen bool
}

func newUICmd() *cobra.Command {
	o := &uiOptions{}
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Open the fleet console in the browser, logged in",
		Long: `ui asks the running fleetd, with the primary's token, for a one-time login
code (valid for a minute, usable once) and opens the console's login link
in the browser (xdg-open, or open on macOS). The browser trades the code for
a session cookie and lands on the console without it; the primary's token
never leaves this command. With --no-open, or when no browser can be opened,
the link is printed instead: open it yourself within the minute.`,
		Example: `  fleetd ui
  fleetd ui --no-open`,
		Args: cobra.NoArgs,
		RunE: runVerb(o),
	}
	o.serverOptions.addFlags(cmd)
	cmd.Flags().BoolVar(&o.noOpen, "no-open", false, "print the login link instead of opening a browser")
	return cmd
}

func (o *uiOptions) Complete(cmd *cobra.Command, _ []string) error {
	o.serverOptions.complete(cmd)
	return nil
}

func (o *uiOptions) Validate() error { return nil }

func (o *uiOptions) Run(ctx context.Context) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var code console.CodeResponse
	if _, err := c.Post(ctx, "/ui/codes", struct{}{}, &code); err != nil {
		return fmt.Errorf("get a login code: %w", err)
	}
	link := c.Server() + code.Path
	left := time.Until(code.ExpiresAt).Round(time.Second)
	if !o.noOpen {
		err := openBrowser(link)
		if err == nil {
			fmt.Fprintf(o.out, "opened the fleetd console in your browser (the login link works once, for %s)\n", left)
			return nil
		}
		fmt.Fprintf(o.errOut, "fleetd ui: cannot open a browser (%v); open the link yourself\n", err)
	}
	fmt.Fprintf(o.out, "%s\n", link)
	fmt.Fprintf(o.errOut, "the link logs in once, within %s\n", left)
	return nil
}

// openBrowser starts the desktop's opener on link and does not wait for it.
func openBrowser(link string) error {
	opener := "xdg-open"
	if runtime.GOOS == "darwin" {
		opener = "open"
	}
	path, err := exec.LookPath(opener)
	if err != nil {
		return fmt.Errorf("no %s", opener)
	}
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" && runtime.GOOS != "darwin" {
		return fmt.Errorf("no display (DISPLAY and WAYLAND_DISPLAY are unset)")
	}
	p := exec.Command(path, link)
	if err := p.Start(); err != nil {
		return err
	}
	go func() { _ = p.Wait() }()
	return nil
}
