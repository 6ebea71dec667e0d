package main

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"
)

func tlsClient(t *testing.T, pemBytes []byte) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatal("the written certificate is not PEM")
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}
