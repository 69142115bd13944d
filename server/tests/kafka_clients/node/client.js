// kafkajs with its default settings (bootstrap servers aside), driven by
// server/tests/kafka.rs.
//
//   client.js produce <bootstrap> <topic> <count>          prints "acked <partition> <offset> <value>"
//   client.js consume <bootstrap> <topic> <group> <count>  prints "<partition> <offset> <value>"
const { Kafka, logLevel } = require('kafkajs');

async function produce(kafka, topic, count) {
  const producer = kafka.producer();
  await producer.connect();
  for (let index = 0; index < count; index++) {
    const value = `js-${index}`;
    const [acked] = await producer.send({ topic, messages: [{ key: `key-${index}`, value }] });
    console.log(`acked ${acked.partition} ${acked.baseOffset} ${value}`);
  }
  await producer.disconnect();
}

async function consume(kafka, topic, group, count) {
  const consumer = kafka.consumer({ groupId: group });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let seen = 0;
  await new Promise((resolve, reject) => {
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        console.log(`${partition} ${message.offset} ${message.value.toString()}`);
        seen += 1;
        if (seen >= count) resolve();
      },
    }).catch(reject);
  });
  await consumer.disconnect();
}

async function main() {
  const [verb, bootstrap, topic, ...rest] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: 'strand-test', brokers: bootstrap.split(','), logLevel: logLevel.ERROR });
  if (verb === 'produce') await produce(kafka, topic, Number(rest[0]));
  else if (verb === 'consume') await consume(kafka, topic, rest[0], Number(rest[1]));
  else throw new Error(`unknown verb ${verb}`);
}

main().then(() => process.exit(0), (error) => { console.error(error); process.exit(1); });
