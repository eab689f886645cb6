// kafkajs 2.x: admin, produce (none/gzip), group consume.
const { Kafka, CompressionTypes, logLevel } = require('kafkajs');
const kafka = new Kafka({ clientId: 'golden-kafkajs', brokers: [process.argv[2]], logLevel: logLevel.NOTHING });

async function main() {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic: 'golden-js', numPartitions: 2 }] }).catch((e) => console.log('create', e.message));
  const producer = kafka.producer();
  await producer.connect();
  for (const compression of [CompressionTypes.None, CompressionTypes.GZIP]) {
    await producer.send({ topic: 'golden-js', compression,
      messages: Array.from({ length: 20 }, (_, i) => ({ key: `k${i}`, value: `value ${i}`, partition: i % 2, headers: { h: 'v' } })) });
  }
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: 'golden-js-group' });
  await consumer.connect();
  await consumer.subscribe({ topic: 'golden-js', fromBeginning: true });
  let got = 0;
  await consumer.run({ eachMessage: async () => { got += 1; } });
  await new Promise((r) => setTimeout(r, 8000));
  await consumer.disconnect();
  await admin.deleteTopics({ topics: ['golden-js'] }).catch((e) => console.log('delete', e.message));
  await admin.disconnect();
  console.log('kafkajs consumed', got);
}
main().catch((e) => { console.error(e); process.exit(1); });
