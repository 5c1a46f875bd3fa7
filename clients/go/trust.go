package starling

// Trust: how the client decides whether to believe the broker's server
// certificate, and the crypto/tls configuration built from it and the
// client's credentials.

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"strings"
)

type trustKind uint8

const (
	trustNone trustKind = iota
	trustCA
	trustFingerprint
	trustInsecure
)

// Trust is how the broker's certificate is checked. Build one with
// TrustCAFile, TrustCAPEM, TrustFingerprint or InsecureTrustAnyServer; the
// zero Trust is refused by Connect (there is no default).
type Trust struct {
	kind        trustKind
	pool        *x509.CertPool
	fingerprint [32]byte
}

// TrustCAPEM trusts the CA certificates in pem.
func TrustCAPEM(pem []byte) (Trust, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return Trust{}, configErr("the CA PEM holds no certificate")
	}
	return Trust{kind: trustCA, pool: pool}, nil
}

// TrustCAFile trusts the CA certificates in the PEM file at path.
func TrustCAFile(path string) (Trust, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return Trust{}, configErr("cannot read CA file %s: %v", path, err)
	}
	return TrustCAPEM(pem)
}

// TrustFingerprint accepts only a broker whose leaf certificate's DER
// encoding has this SHA-256: 64 hex digits, optionally separated by ':'
// (the form the broker logs for its self-signed certificate).
func TrustFingerprint(sha256Hex string) (Trust, error) {
	digits := strings.ReplaceAll(strings.TrimSpace(sha256Hex), ":", "")
	raw, err := hex.DecodeString(digits)
	if err != nil || len(raw) != sha256.Size {
		return Trust{}, configErr("bad SHA-256 fingerprint: expected 64 hex digits")
	}
	t := Trust{kind: trustFingerprint}
	copy(t.fingerprint[:], raw)
	return t, nil
}

// InsecureTrustAnyServer accepts any server certificate. For development
// only: anyone on the path can impersonate the broker. The TLS handshake
// signature is still checked.
func InsecureTrustAnyServer() Trust { return Trust{kind: trustInsecure} }

// CertificateFingerprint is the SHA-256 of a certificate's DER encoding, the
// value TrustFingerprint takes (in hex).
func CertificateFingerprint(der []byte) [32]byte { return sha256.Sum256(der) }

var errFingerprint = errors.New("server certificate does not match the pinned SHA-256 fingerprint")

// tlsConfig builds the TLS 1.3 client configuration for one ALPN.
func tlsConfig(t Trust, creds Credentials, serverName, alpn string) (*tls.Config, error) {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{alpn},
		ServerName: serverName,
	}
	switch t.kind {
	case trustCA:
		cfg.RootCAs = t.pool
	case trustFingerprint:
		want := t.fingerprint
		// The chain is not verified against roots: the pinned leaf is the trust.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errFingerprint
			}
			got := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
				return errFingerprint
			}
			return nil
		}
	case trustInsecure:
		cfg.InsecureSkipVerify = true
	default:
		return nil, configErr("no trust chosen: use TrustCAFile, TrustCAPEM, TrustFingerprint or InsecureTrustAnyServer")
	}
	if creds.cert != nil {
		cfg.Certificates = []tls.Certificate{*creds.cert}
	}
	return cfg, nil
}

// serverNameFor is the TLS server name: the explicit one, else the host,
// else "localhost" when the host is an IP address (as the Rust SDK does).
func serverNameFor(explicit, host string) string {
	if explicit != "" {
		return explicit
	}
	if net.ParseIP(host) != nil {
		return "localhost"
	}
	return host
}
