package dashboard_test

import (
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"strings"

	"github.com/tgrelay/tgrelay/dashboard"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// A relay mounts the dashboard on its admin listener, over its store, and
// feeds a Recorder from the intake runner's observer.
func Example() {
	store := memstore.New()
	rec := dashboard.NewRecorder()
	// In a relay: intake.Config{Store: store, Observer: rec.Observer(), ...}
	rec.Add(dashboard.SeriesAccepted, 1)

	addr := "127.0.0.1:8081" // the admin listener
	if err := dashboard.CheckExposure(addr, ""); err != nil {
		log.Fatal(err) // a non-loopback address needs an admin token
	}
	h, err := dashboard.New(dashboard.Config{Store: store, StoreName: "memory", Recorder: rec})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	srv := httptest.NewServer(h) // in a relay: the admin server's mux
	defer srv.Close()

	resp, err := srv.Client().Get(srv.URL + "/")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, strings.Contains(string(page), "<title>Overview · tgrelay</title>"))
	fmt.Println(dashboard.CheckExposure("0.0.0.0:8081", ""))
	// Output:
	// 200 true
	// dashboard: an admin token is required on a non-loopback address: 0.0.0.0:8081 (set an admin token, or listen on 127.0.0.1)
}
