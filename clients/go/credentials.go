package starling

// Credentials: who the client is to the broker (nobody, a token user or a
// certificate user), and LoadCredentialsDir, which reads them from a
// directory laid out like the Secret the operator writes for a BrokerUser.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Files of a credentials directory (a mounted BrokerUser Secret).
const (
	// TokenFile holds a token user's token.
	TokenFile = "token"
	// CertFile holds a certificate user's client certificate chain (PEM).
	CertFile = "tls.crt"
	// KeyFile holds the client certificate's private key (PEM).
	KeyFile = "tls.key"
	// CAFile optionally holds the CA that signed the brokers' certificate.
	CAFile = "ca.crt"
	// AddressFile optionally holds the broker's host:port.
	AddressFile = "address"
)

// Credentials say how the client authenticates. The zero value is no
// identity, accepted only by a broker running with auth_mode: none. The
// token and the private key never appear in String or error output.
type Credentials struct {
	token string
	cert  *tls.Certificate
}

// TokenCredentials authenticates as a token user: the token is sent in
// Hello.auth_token with the AUTH_TOKEN feature bit.
func TokenCredentials(token string) Credentials { return Credentials{token: token} }

// CertificateCredentials authenticates as a certificate user (the
// certificate's common name is the user's name) from a PEM certificate
// chain and its PEM private key; both are checked now.
func CertificateCredentials(certPEM, keyPEM []byte) (Credentials, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return Credentials{}, configErr("client certificate: %v", err)
	}
	return Credentials{cert: &pair}, nil
}

// CertificateFileCredentials reads CertificateCredentials from two PEM files.
func CertificateFileCredentials(certFile, keyFile string) (Credentials, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return Credentials{}, configErr("cannot read %s: %v", certFile, err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return Credentials{}, configErr("cannot read %s: %v", keyFile, err)
	}
	return CertificateCredentials(certPEM, keyPEM)
}

// String names the kind of credentials, never the secret.
func (c Credentials) String() string {
	switch {
	case c.token != "":
		return "token(<redacted>)"
	case c.cert != nil:
		return "certificate"
	}
	return "none"
}

// GoString is String, so %#v does not print the secret either.
func (c Credentials) GoString() string { return c.String() }

// CredentialsDir is what LoadCredentialsDir found.
type CredentialsDir struct {
	// Credentials is the token or the certificate and key.
	Credentials Credentials
	// Trust is ca.crt as TrustCAPEM, when HasTrust.
	Trust Trust
	// HasTrust says whether the directory held ca.crt.
	HasTrust bool
	// Address is the trimmed content of the address file ("" if absent).
	Address string
}

// Config is a client Config for the directory alone: its address, its ca.crt
// and its credentials. It fails when the directory has no address or ca.crt
// (build the Config yourself then).
func (d *CredentialsDir) Config() (Config, error) {
	if d.Address == "" {
		return Config{}, configErr("the credentials directory has no `%s` file: give the server address", AddressFile)
	}
	if !d.HasTrust {
		return Config{}, configErr("the credentials directory has no `%s` file: choose how to trust the server", CAFile)
	}
	return Config{Server: d.Address, Trust: d.Trust, Credentials: d.Credentials}, nil
}

// LoadCredentialsDir reads a credentials directory, as the Rust SDK's
// Credentials::load_dir and the CLI's --credentials do: exactly one identity
// (token, or tls.crt with tls.key), plus optional ca.crt and address.
func LoadCredentialsDir(dir string) (*CredentialsDir, error) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, configErr("credentials directory %s does not exist or is not a directory", dir)
	}
	token, err := readOptional(filepath.Join(dir, TokenFile))
	if err != nil {
		return nil, err
	}
	cert, err := readOptional(filepath.Join(dir, CertFile))
	if err != nil {
		return nil, err
	}
	key, err := readOptional(filepath.Join(dir, KeyFile))
	if err != nil {
		return nil, err
	}
	out := &CredentialsDir{}
	switch {
	case token != nil && (cert != nil || key != nil):
		return nil, configErr("credentials directory %s holds both `token` and `tls.crt`/`tls.key`: keep only one identity", dir)
	case token != nil:
		t := strings.TrimSpace(string(token))
		if t == "" || !utf8.Valid(token) {
			return nil, configErr("%s does not hold a token (it is empty or not UTF-8 text)", filepath.Join(dir, TokenFile))
		}
		out.Credentials = TokenCredentials(t)
	case cert != nil && key != nil:
		if out.Credentials, err = CertificateCredentials(cert, key); err != nil {
			return nil, err
		}
	case cert != nil:
		return nil, configErr("credentials directory %s has `%s` but no `%s`", dir, CertFile, KeyFile)
	case key != nil:
		return nil, configErr("credentials directory %s has `%s` but no `%s`", dir, KeyFile, CertFile)
	default:
		return nil, configErr("credentials directory %s holds neither `token` nor `tls.crt` and `tls.key`", dir)
	}
	ca, err := readOptional(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, err
	}
	if ca != nil {
		if out.Trust, err = TrustCAPEM(ca); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, CAFile), err)
		}
		out.HasTrust = true
	}
	addr, err := readOptional(filepath.Join(dir, AddressFile))
	if err != nil {
		return nil, err
	}
	if addr != nil {
		if !utf8.Valid(addr) {
			return nil, configErr("%s: not UTF-8 text", filepath.Join(dir, AddressFile))
		}
		out.Address = strings.TrimSpace(string(addr))
	}
	return out, nil
}

// readOptional is a file's bytes, nil when it does not exist.
func readOptional(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, configErr("cannot read %s: %v", path, err)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}
