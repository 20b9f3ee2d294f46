package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TLSFiles are the PEM files of a cluster started with Options.TLS: the CA
// that signed everything, the members' server certificate (for 127.0.0.1)
// and a client certificate the members accept.
type TLSFiles struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
	// OtherCA is a CA the cluster does not trust, and OtherCert/OtherKey a
	// client certificate it signed: what an intruder would present.
	OtherCA, OtherCert, OtherKey string
}

// writeTLS makes two CAs and their certificates in dir.
func writeTLS(dir string) (*TLSFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f := &TLSFiles{}
	ca, caKey, err := newCA(filepath.Join(dir, "ca.pem"), "etcdtest CA")
	if err != nil {
		return nil, err
	}
	f.CA = filepath.Join(dir, "ca.pem")
	f.ServerCert, f.ServerKey = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	if err := newLeaf(ca, caKey, f.ServerCert, f.ServerKey, "etcd", true); err != nil {
		return nil, err
	}
	f.ClientCert, f.ClientKey = filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	if err := newLeaf(ca, caKey, f.ClientCert, f.ClientKey, "fleetd", false); err != nil {
		return nil, err
	}
	other, otherKey, err := newCA(filepath.Join(dir, "other-ca.pem"), "not the cluster's CA")
	if err != nil {
		return nil, err
	}
	f.OtherCA = filepath.Join(dir, "other-ca.pem")
	f.OtherCert, f.OtherKey = filepath.Join(dir, "other.pem"), filepath.Join(dir, "other-key.pem")
	if err := newLeaf(other, otherKey, f.OtherCert, f.OtherKey, "intruder", false); err != nil {
		return nil, err
	}
	return f, nil
}

func template(cn string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62)) // crypto/rand never fails on supported platforms
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
}

func newCA(path, cn string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := template(cn)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("etcdtest: CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, writePEM(path, "CERTIFICATE", der)
}

func newLeaf(ca *x509.Certificate, caKey *ecdsa.PrivateKey, certPath, keyPath, cn string, server bool) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := template(cn)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("etcdtest: certificate %s: %w", cn, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(keyPath, "EC PRIVATE KEY", keyDER)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
