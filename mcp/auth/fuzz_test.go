package auth

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer a.b.c", "Bearer  x==", "Basic x", "Bearer", "Bearer a b", "Bearer =", "BEARER tok/+~-._="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		h := http.Header{}
		h.Set("Authorization", v)
		tok, err := BearerToken(h)
		if err != nil {
			if tok != "" || !errors.Is(err, errMalformed) {
				t.Fatalf("got %q, %v", tok, err)
			}
			return
		}
		if tok == "" || len(tok) > maxHeaderToken || strings.ContainsAny(tok, " \t\r\n,\"") {
			t.Fatalf("accepted token %q from %q", tok, v)
		}
		if !strings.HasSuffix(v, tok) || !strings.EqualFold(v[:6], "bearer") {
			t.Fatalf("token %q is not the credential of %q", tok, v)
		}
	})
}

func FuzzCanonicalURI(f *testing.F) {
	for _, s := range []string{testResource, "HTTP://A/b/", "https://x#", "https://x?", "https://[::1]:80/a", "https://%41/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := CanonicalURI(s)
		if err != nil {
			return
		}
		again, err := CanonicalURI(c)
		if err != nil || again != c {
			t.Fatalf("CanonicalURI(%q) = %q, but CanonicalURI(%q) = %q, %v", s, c, c, again, err)
		}
		if strings.ContainsAny(c, "#?") || strings.HasSuffix(c, "/") {
			t.Fatalf("CanonicalURI(%q) = %q keeps a fragment, query or trailing slash", s, c)
		}
	})
}

// FuzzJWTVerify feeds arbitrary tokens, and mutations of a valid one, to
// a verifier: it must never panic and must accept nothing but tokens
// signed by the issuer's key.
func FuzzJWTVerify(f *testing.F) {
	is := newIssuer(f)
	now := time.Now()
	valid := sign(f, is.key("k1"), "k1", is.claims(testResource, now))
	f.Add(valid)
	f.Add(noneToken(`{"sub":"x"}`))
	f.Add("a.b.c")
	f.Add(valid + "x")
	v, err := NewJWTVerifier(JWTOptions{Issuer: is.url, Audience: testResource, Now: func() time.Time { return now }})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		p, err := v.Verify(t.Context(), tok)
		if err != nil {
			if p != nil {
				t.Fatalf("principal with an error")
			}
			return
		}
		if p.Subject != "carol" || p.Issuer != is.url {
			t.Fatalf("accepted a token of %q from %q", p.Subject, p.Issuer)
		}
	})
}
