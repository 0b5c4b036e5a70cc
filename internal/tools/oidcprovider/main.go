// Command oidcprovider runs the test OpenID provider of
// internal/authtest as a program, for end-to-end runs where the MCP
// client is not Go (the TypeScript SDK's OAuth client, the conformance
// suite): a real provider built from Go modules, on loopback, with
// discovery, a JWKS, client credentials, the authorization code flow with
// PKCE (its login step authenticates at once), introspection, and the
// RFC 8707 resource parameter as the token audience.
//
// Usage:
//
//	oidcprovider --listen 127.0.0.1:9400 --resource http://127.0.0.1:8080/mcp \
//	    --client svc:svc-secret:mcp:tools --client app::mcp:tools,mcp:admin \
//	    --redirect http://127.0.0.1:3000/callback
//
// A --client is id:secret:scopes: the scopes (everything after the second
// colon) are comma-separated, and an empty secret makes a public client,
// which must use PKCE. --opaque names a client that gets opaque access
// tokens (to be introspected) instead of JWTs.
//
// With --front-listen it also runs a reverse proxy there that adds
// "Authorization: Bearer <token>" to every request it passes to
// --front-upstream, the token coming from the confidential client
// --front-client by client credentials with --resource as audience: for
// clients that cannot send a token themselves, such as the conformance
// suite (scripts/conformance.sh --auth).
//
// It prints "issuer <url>" (and "front <url>") once it serves, and runs
// until SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/mcpcluster/mcpcluster/internal/authtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "oidcprovider:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("oidcprovider", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "loopback address to listen on")
	resource := fs.String("resource", "", "audience of tokens whose request names no resource (RFC 8707)")
	user := fs.String("user", "alice", "subject the login step authenticates when the request has no login_hint")
	var redirects []string
	fs.Func("redirect", "redirect URI allowed for every client (repeatable)", func(v string) error {
		redirects = append(redirects, v)
		return nil
	})
	var clients []*authtest.Client
	var opaque []string
	fs.Func("opaque", "id of a client that gets opaque access tokens (repeatable)", func(v string) error {
		opaque = append(opaque, v)
		return nil
	})
	fs.Func("client", "id:secret:scope,scope (repeatable)", func(v string) error {
		c, err := parseClient(v)
		if err == nil {
			clients = append(clients, c)
		}
		return err
	})
	frontListen := fs.String("front-listen", "", "address of a token-injecting reverse proxy (off when empty)")
	frontUpstream := fs.String("front-upstream", "", "base URL the front passes requests to (http://host:port)")
	frontClient := fs.String("front-client", "", "confidential --client whose client-credentials token the front adds")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(clients) == 0 {
		return errors.New("no --client given")
	}
	for _, c := range clients {
		c.Redirects = redirects
		c.Opaque = slices.Contains(opaque, c.ID)
	}
	p, err := authtest.New(*listen, authtest.Options{Clients: clients, DefaultResource: *resource, DefaultUser: *user})
	if err != nil {
		return err
	}
	defer p.Close()
	fmt.Fprintf(stdout, "issuer %s\n", p.Issuer)
	if *frontListen != "" {
		u, err := startFront(ctx, p, clients, *frontClient, *frontListen, *frontUpstream, *resource)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "front %s\n", u)
	}
	<-ctx.Done()
	return nil
}

// parseClient reads id:secret:scopes.
func parseClient(v string) (*authtest.Client, error) {
	parts := strings.SplitN(v, ":", 3)
	if len(parts) != 3 || parts[0] == "" {
		return nil, fmt.Errorf("client %q: want id:secret:scopes", v)
	}
	c := &authtest.Client{ID: parts[0], Secret: parts[1]}
	for _, s := range strings.Split(parts[2], ",") {
		if s != "" {
			c.Scopes = append(c.Scopes, s)
		}
	}
	return c, nil
}
