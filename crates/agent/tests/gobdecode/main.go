// gobdecode reads a stream of Cilium's monitor protocol 1.2 with Go's own
// encoding/gob, as Cilium 1.16's `cilium-dbg monitor` does (one
// gob.Decoder per connection), and prints each payload as one JSON line:
//
//	{"type":9,"cpu":1,"lost":0,"data":"<hex>"}
//
// with, for an agent notification (data starting with 130,
// MessageTypeAgent), the AgentNotify gob-encoded after that byte:
//
//	{..., "agent":{"type":5,"text":"{...}"}}
//
// Usage: gobdecode [-n N] [socket]: the stream from the unix socket, or
// from stdin without one; -n stops after N payloads. Standard library only.
package main

import (
	"bufio"
	"bytes"
	"encoding/gob"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
)

// Payload is Cilium's pkg/monitor/payload.Payload.
type Payload struct {
	Data []byte
	CPU  int
	Lost uint64
	Type int
}

// AgentNotify is Cilium's pkg/monitor/api.AgentNotify (Type is an
// AgentNotification, a uint32).
type AgentNotify struct {
	Type uint32
	Text string
}

const messageTypeAgent = 130

type agentLine struct {
	Type uint32 `json:"type"`
	Text string `json:"text"`
}

type line struct {
	Type  int        `json:"type"`
	CPU   int        `json:"cpu"`
	Lost  uint64     `json:"lost"`
	Data  string     `json:"data"`
	Agent *agentLine `json:"agent,omitempty"`
}

func main() {
	n := flag.Int("n", -1, "stop after this many payloads")
	flag.Parse()
	var in io.Reader = os.Stdin
	if flag.NArg() > 0 {
		conn, err := net.Dial("unix", flag.Arg(0))
		if err != nil {
			fmt.Fprintln(os.Stderr, "gobdecode:", err)
			os.Exit(1)
		}
		defer conn.Close()
		in = conn
	}
	dec := gob.NewDecoder(bufio.NewReader(in))
	out := json.NewEncoder(os.Stdout)
	for i := 0; *n < 0 || i < *n; i++ {
		// A fresh value each time: what this message carries, nothing
		// left over from the one before.
		var pl Payload
		if err := dec.Decode(&pl); err != nil {
			if err == io.EOF && *n < 0 {
				return
			}
			fmt.Fprintf(os.Stderr, "gobdecode: payload %d: %v\n", i, err)
			os.Exit(1)
		}
		l := line{Type: pl.Type, CPU: pl.CPU, Lost: pl.Lost, Data: hex.EncodeToString(pl.Data)}
		if len(pl.Data) > 0 && pl.Data[0] == messageTypeAgent {
			var an AgentNotify
			if err := gob.NewDecoder(bytes.NewReader(pl.Data[1:])).Decode(&an); err != nil {
				fmt.Fprintf(os.Stderr, "gobdecode: payload %d: agent notification: %v\n", i, err)
				os.Exit(1)
			}
			l.Agent = &agentLine{Type: an.Type, Text: an.Text}
		}
		if err := out.Encode(l); err != nil {
			fmt.Fprintln(os.Stderr, "gobdecode:", err)
			os.Exit(1)
		}
	}
}
