package starling_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"starling.invalid/starling"
)

// The ten-line program of the README: connect with a BrokerUser's mounted
// credentials, subscribe, publish, read one event.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dir, err := starling.LoadCredentialsDir("/etc/starling/user")
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := dir.Config()
	if err != nil {
		log.Fatal(err)
	}
	client, err := starling.Connect(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	sub, err := client.Subscribe(ctx, "orders.eu", starling.Live())
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	if err := client.PublishAcked(ctx, "orders.eu", []byte("hello")); err != nil {
		log.Fatal(err)
	}
	event, err := sub.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s at %+v\n", event.Payload, event.Position)
}

// A credentials directory laid out like a BrokerUser's Secret.
func ExampleLoadCredentialsDir() {
	dir, _ := os.MkdirTemp("", "starling-example")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, starling.TokenFile), []byte("s3cret\n"), 0o600)
	_ = os.WriteFile(filepath.Join(dir, starling.AddressFile), []byte("broker.ns.svc:7400\n"), 0o600)
	found, err := starling.LoadCredentialsDir(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(found.Credentials, found.Address, found.HasTrust)
	_, err = found.Config()
	fmt.Println(err)
	// Output:
	// token(<redacted>) broker.ns.svc:7400 false
	// starling: invalid configuration: the credentials directory has no `ca.crt` file: choose how to trust the server
}

// Pinning the broker's self-signed certificate by the fingerprint it logs.
func ExampleTrustFingerprint() {
	_, err := starling.TrustFingerprint("AB:CD")
	fmt.Println(err)
	_, err = starling.TrustFingerprint("0000000000000000000000000000000000000000000000000000000000000000")
	fmt.Println(err)
	// Output:
	// starling: invalid configuration: bad SHA-256 fingerprint: expected 64 hex digits
	// <nil>
}

// Where a subscription starts.
func ExampleFromPosition() {
	resume := starling.Position{Stream: 0x1f2e3d, Seq: 42}
	fmt.Printf("%+v\n", starling.FromPosition(resume))
	fmt.Printf("%+v\n", starling.FromTime(time.UnixMilli(1767225600000)))
	fmt.Printf("%+v\n", starling.Live())
	// Output:
	// {Kind:1 Position:{Stream:2043453 Seq:42} TimeMs:0}
	// {Kind:2 Position:{Stream:0 Seq:0} TimeMs:1767225600000}
	// {Kind:0 Position:{Stream:0 Seq:0} TimeMs:0}
}
