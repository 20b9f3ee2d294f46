package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/fleetd-dev/fleetd/api/v1alpha1"
	"github.com/fleetd-dev/fleetd/controllers"
	"github.com/fleetd-dev/fleetd/internal/fleet"
	"github.com/fleetd-dev/fleetd/internal/scheduler"
	"github.com/fleetd-dev/fleetd/internal/store/etcdstore"
)

// DefaultEtcdPrefix is the key prefix of a fleet whose EtcdConfig.Prefix
// is empty.
const DefaultEtcdPrefix = etcdstore.DefaultPrefix

// FencePolicy is what a node does at its fence deadline
// (--fence-policy): controllers.FenceClose or controllers.FencePause.
type FencePolicy = controllers.FencePolicy

// DefaultFencePolicy is --fence-policy's default: close.
const DefaultFencePolicy = string(controllers.FenceClose)

// DefaultRescheduleAfter is the grace of a lost node's members when
// EtcdConfig.RescheduleAfter is 0.
const DefaultRescheduleAfter = scheduler.DefaultRescheduleAfter

// EtcdConfig selects the etcd store (`fleetd serve --store etcd`).
type EtcdConfig struct {
	// Endpoints are etcd's client URLs (http:// or https://).
	Endpoints []string
	// Prefix is the key prefix of the fleet; "" means etcdstore.DefaultPrefix.
	Prefix string
	// Node is this fleetd's node name, unique in the fleet.
	Node string
	// NodeLabels are the node's labels (--node-labels), checked as a
	// Member's labels are.
	NodeLabels map[string]string
	// MaxMembers is the node's capacity (--max-members); 0 is no limit.
	MaxMembers int
	// CACert verifies etcd's server certificate; Cert and Key are this
	// node's client certificate, for an etcd that requires one. Files in
	// PEM; all empty for plain http.
	CACert, Cert, Key string
	// RequestTimeout bounds each request to etcd; 0 means
	// etcdstore.DefaultRequestTimeout.
	RequestTimeout time.Duration
	// RescheduleAfter is how long the members of a lost node stay bound
	// to it before the scheduler binds them elsewhere
	// (--reschedule-after); 0 means scheduler.DefaultRescheduleAfter.
	RescheduleAfter time.Duration
	// NodeTTL is the node's lease (its registration, its candidacy in the
	// scheduler election, the waiting keys of the calls it holds); 0 means
	// session.DefaultTTL.
	NodeTTL time.Duration
	// FencePolicy is what the node does at its fence deadline with the
	// panes of the members another node may take over
	// (--fence-policy): close them ("" too) or interrupt their agents and
	// keep them (controllers.FencePause).
	FencePolicy FencePolicy
	// FenceWatchdog, if set, is the command line of the node's fence
	// watchdog (`fleetd fence-watchdog`: fleetd's own executable and the
	// subcommand; the daemon adds --herdr-socket), a process of its own
	// that closes or interrupts the panes of the members another node may
	// take over at the fence's deadline when this fleetd does not run
	// (stopped, hung): package fencewatch. nil runs none (a node in a
	// test's process, or on the simulated herdr, whose agents stop with
	// fleetd).
	FenceWatchdog []string
	// CheckInterval is how often the node checks that etcd is still its
	// fleet's (its identity, its revision: etcdstore's fence) when nothing
	// else made it check; 0 means etcdstore.DefaultCheckInterval.
	CheckInterval time.Duration
	// Client, if set, adjusts the etcd client's configuration before it is
	// created (tests add gRPC interceptors that count the node's requests);
	// nil leaves fleetd's.
	Client func(*clientv3.Config)
}

// Check reports what is missing or malformed, before anything starts.
func (c *EtcdConfig) Check() error {
	if len(c.Endpoints) == 0 {
		return errors.New("the etcd store needs --etcd-endpoints (etcd's client URLs, comma-separated)")
	}
	for _, e := range c.Endpoints {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("etcd endpoint %q: want a URL like http://127.0.0.1:2379 or https://etcd-1:2379", e)
		}
	}
	if err := fleet.CheckNodeName(c.Node); err != nil {
		return fmt.Errorf("--node: %w", err)
	}
	if errs := v1alpha1.ValidateNodeLabels(c.NodeLabels); len(errs) > 0 {
		return fmt.Errorf("--node-labels: %w", errs)
	}
	if c.MaxMembers < 0 {
		return fmt.Errorf("--max-members %d: want 0 (no limit) or more", c.MaxMembers)
	}
	if c.RescheduleAfter < 0 {
		return fmt.Errorf("--reschedule-after %s: want a positive duration, e.g. 5m", c.RescheduleAfter)
	}
	if c.FencePolicy != "" && !slices.Contains(controllers.FencePolicies, c.FencePolicy) {
		return fmt.Errorf("--fence-policy %q: want close (the default: close the panes another node may take over) or pause (interrupt their agents and keep the panes)", c.FencePolicy)
	}
	if (c.Cert == "") != (c.Key == "") {
		return errors.New("--etcd-cert and --etcd-key go together: the client certificate and its key")
	}
	return nil
}

// tlsConfig returns the TLS configuration for etcd; nil for none.
func (c *EtcdConfig) tlsConfig() (*tls.Config, error) {
	https := false
	for _, e := range c.Endpoints {
		https = https || strings.HasPrefix(e, "https://")
	}
	if c.CACert == "" && c.Cert == "" && !https {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CACert != "" {
		pem, err := os.ReadFile(c.CACert)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--etcd-cacert %s: no PEM certificate in it", c.CACert)
		}
		cfg.RootCAs = pool
	}
	if c.Cert != "" {
		pair, err := tls.LoadX509KeyPair(c.Cert, c.Key)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cert/--etcd-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// explainTLS says why a TLS connection to the endpoints fails, if one
// does: etcd's client reports a refused certificate only as a timeout.
// nil when the handshake and the server's first bytes come through.
func explainTLS(c *EtcdConfig) error {
	cfg, err := c.tlsConfig()
	if err != nil || cfg == nil {
		return err
	}
	var errs []error
	for _, e := range c.Endpoints {
		u, err := url.Parse(e)
		if err != nil || u.Scheme != "https" {
			continue
		}
		conf := cfg.Clone()
		conf.ServerName, conf.NextProtos = u.Hostname(), []string{"h2"}
		err = probe(u.Host, conf)
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", e, err))
	}
	return errors.Join(errs...)
}

// probe opens a TLS connection and reads the server's first bytes: with
// TLS 1.3 a refused client certificate shows only there.
func probe(addr string, cfg *tls.Config) error {
	d := &net.Dialer{Timeout: 2 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(time.Second))
	var b [1]byte
	if _, err := conn.Read(b[:]); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil // nothing to read yet, but the certificate was taken
		}
		return err
	}
	return nil
}

// dialEtcd returns a client of the configured etcd. It does not wait for
// etcd: the store lists and retries on its own, so a fleetd started while
// etcd is down comes up (not ready) and converges when etcd does.
func dialEtcd(c *EtcdConfig, log *slog.Logger) (*clientv3.Client, error) {
	tlsCfg, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	cc := clientv3.Config{
		Endpoints:            c.Endpoints,
		TLS:                  tlsCfg,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		Logger:               zap.NewNop(),
	}
	if c.Client != nil {
		c.Client(&cc)
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, fmt.Errorf("etcd client for %s: %w", strings.Join(c.Endpoints, ","), err)
	}
	log.Info("etcd store", "endpoints", strings.Join(c.Endpoints, ","), "tls", tlsCfg != nil)
	return cli, nil
}
