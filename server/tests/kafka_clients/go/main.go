// franz-go with its default settings (seed brokers aside; its producer is
// idempotent by default), driven by server/tests/kafka.rs.
//
//	franz produce <bootstrap> <topic> <count>          prints "acked <partition> <offset> <value>"
//	franz consume <bootstrap> <topic> <group> <count>  prints "<partition> <offset> <value>"
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	verb, bootstrap, topic := os.Args[1], os.Args[2], os.Args[3]
	seeds := kgo.SeedBrokers(strings.Split(bootstrap, ",")...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	switch verb {
	case "produce":
		count, _ := strconv.Atoi(os.Args[4])
		err = produce(ctx, seeds, topic, count)
	case "consume":
		count, _ := strconv.Atoi(os.Args[5])
		err = consume(ctx, seeds, topic, os.Args[4], count)
	default:
		err = fmt.Errorf("unknown verb %s", verb)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func produce(ctx context.Context, seeds kgo.Opt, topic string, count int) error {
	client, err := kgo.NewClient(seeds, kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer client.Close()
	for index := 0; index < count; index++ {
		value := fmt.Sprintf("go-%d", index)
		record := &kgo.Record{Key: []byte(fmt.Sprintf("key-%d", index)), Value: []byte(value)}
		if err := client.ProduceSync(ctx, record).FirstErr(); err != nil {
			return err
		}
		fmt.Printf("acked %d %d %s\n", record.Partition, record.Offset, value)
	}
	return nil
}

func consume(ctx context.Context, seeds kgo.Opt, topic, group string, count int) error {
	client, err := kgo.NewClient(seeds, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer client.Close()
	seen := 0
	for seen < count {
		fetches := client.PollFetches(ctx)
		if errs := fetches.Errors(); len(errs) > 0 {
			return fmt.Errorf("%v", errs)
		}
		fetches.EachRecord(func(record *kgo.Record) {
			fmt.Printf("%d %d %s\n", record.Partition, record.Offset, string(record.Value))
			seen++
		})
	}
	return client.CommitUncommittedOffsets(ctx)
}
