package testenv

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// What a test cluster's nodes say about its topology: who serves which
// slots, and which master a key lives on.

// ClusterNode is one line of CLUSTER NODES.
type ClusterNode struct {
	ID, Addr, MasterID string
	Master, Failed     bool
	Slots              []string
}

// Nodes reads CLUSTER NODES from the first live node that answers.
func (c *RedisCluster) Nodes(ctx context.Context) ([]ClusterNode, error) {
	var firstErr error
	for _, n := range c.nodes {
		if !n.Alive() {
			continue
		}
		rdb := redis.NewClient(&redis.Options{Addr: n.Addr, DialTimeout: time.Second, MaxRetries: -1})
		out, err := rdb.ClusterNodes(ctx).Result()
		rdb.Close()
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		return ParseClusterNodes(out), nil
	}
	return nil, fmt.Errorf("no redis node answers CLUSTER NODES: %v", firstErr)
}

// ParseClusterNodes reads the output of CLUSTER NODES.
func ParseClusterNodes(out string) []ClusterNode {
	var nodes []ClusterNode
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		n := ClusterNode{ID: f[0], Addr: addr, Slots: f[8:]}
		for fl := range strings.SplitSeq(f[2], ",") {
			switch fl {
			case "master":
				n.Master = true
			case "fail", "fail?":
				n.Failed = true
			}
		}
		if f[3] != "-" {
			n.MasterID = f[3]
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// Masters lists the addresses of live masters that serve slots.
func (c *RedisCluster) Masters(ctx context.Context) ([]string, error) {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range nodes {
		if n.Master && !n.Failed && len(n.Slots) > 0 {
			out = append(out, n.Addr)
		}
	}
	return out, nil
}

// MasterOf returns the address of the master serving key.
func (c *RedisCluster) MasterOf(ctx context.Context, key string) (string, error) {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return "", err
	}
	s := KeySlot(key)
	for _, n := range nodes {
		if !n.Master || n.Failed {
			continue
		}
		for _, r := range n.Slots {
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil && s >= a && s <= b {
				return n.Addr, nil
			}
		}
	}
	return "", fmt.Errorf("no master serves slot %d", s)
}

// KeySlot is the Redis Cluster hash slot of key (CRC16 of its hash tag).
func KeySlot(key string) int {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}
