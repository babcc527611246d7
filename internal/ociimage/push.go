package ociimage

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// ParseRef parses the reference an image is pushed to. It must name the
// registry, the repository and a tag or digest, nothing implied:
// "wafguard" alone is refused rather than sent to Docker Hub's
// library/wafguard:latest.
func ParseRef(ref string) (name.Reference, error) {
	r, err := name.ParseReference(ref, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("push: %q is not a full image reference (%v): want REGISTRY/REPOSITORY:TAG, e.g. ghcr.io/you/wafguard:0.1.0 or 127.0.0.1:5000/wafguard:dev", ref, err)
	}
	return r, nil
}

// Push pushes img to ref with the credentials keychain resolves for the
// registry (authn.DefaultKeychain: the Docker config, $DOCKER_CONFIG, and
// its credential helpers), and returns the pushed image's reference by
// digest. opts are added to the remote options (a transport, in tests).
func Push(ctx context.Context, ref string, img v1.Image, keychain authn.Keychain, opts ...remote.Option) (name.Digest, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return name.Digest{}, err
	}
	d, err := img.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	ro := append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(keychain)}, opts...)
	if err := remote.Write(r, img, ro...); err != nil {
		return name.Digest{}, explainPush(r, err)
	}
	return r.Context().Digest(d.String()), nil
}

// explainPush turns a failed push into an error that says what to do.
func explainPush(r name.Reference, err error) error {
	reg := r.Context().RegistryStr()
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized:
			return fmt.Errorf("push: %s refused the credentials (401 Unauthorized) for %s: log in with docker login %s (the Docker config, $DOCKER_CONFIG or a credential helper provide them), or check the user and password or token: %w", reg, r.Context().RepositoryStr(), reg, err)
		case http.StatusForbidden:
			return fmt.Errorf("push: %s denied the push (403 Forbidden) to %s: the account logged in with docker login %s may not write to this repository: %w", reg, r.Context().RepositoryStr(), reg, err)
		}
	}
	var ne net.Error
	var oe *net.OpError
	if errors.As(err, &oe) || errors.As(err, &ne) {
		return fmt.Errorf("push: cannot reach %s (%s://%s): check the registry's address and that it is up: %w", reg, r.Context().Scheme(), reg, err)
	}
	return fmt.Errorf("push: %s: %w", r, err)
}
