// A DNS server on loopback (UDP, 127.0.0.1, a port of its own) for the domains' TXT look-ups
// (CONTRACT §31): a test sets which TXT records a name holds, or makes it fail as a broken
// resolver does (SERVFAIL); any other name is NXDOMAIN. The gateway reaches it through
// organizations.sso.dns.resolvers, as it would the operator's resolvers. Messages are read and
// written with `dns-packet`, not by hand.
import { createSocket, type Socket } from 'node:dgram';
import dnsPacket from 'dns-packet';

const NXDOMAIN = 3;
const SERVFAIL = 2;
const AUTHORITATIVE = 1 << 10;

export interface DnsServer {
  /** `127.0.0.1:<port>`, as organizations.sso.dns.resolvers takes it. */
  address: string;
  /** The TXT records of `name` from now on, each a string or its chunks (none: the name exists without TXT, NODATA). */
  setTxt(name: string, values: Array<string | string[]>): void;
  /** `name` answers SERVFAIL from now on. */
  fail(name: string): void;
  /** `name` is NXDOMAIN from now on. */
  remove(name: string): void;
  /** `name`'s questions wait unanswered until the returned function is called (then answered as the name is then). */
  hold(name: string): () => void;
  /** TXT questions asked, by name (lower-case). */
  asked(name: string): number;
  close(): Promise<void>;
}

export async function startDnsServer(): Promise<DnsServer> {
  const records = new Map<string, Array<string | string[]> | 'fail'>();
  const questions = new Map<string, number>();
  const held = new Map<string, Array<() => void>>();
  const socket: Socket = createSocket('udp4');
  socket.on('message', (message, peer) => {
    let query: dnsPacket.Packet;
    try {
      query = dnsPacket.decode(message);
    } catch {
      return; // not DNS: no answer, as a server would
    }
    const question = query.questions?.[0];
    const name = question?.name.toLowerCase() ?? '';
    questions.set(name, (questions.get(name) ?? 0) + 1);
    const answer = () => {
      const record = records.get(name);
      const rcode = record === undefined ? NXDOMAIN : record === 'fail' ? SERVFAIL : 0;
      const answers = Array.isArray(record) && question?.type === 'TXT'
        ? record.map((value) => ({ type: 'TXT' as const, name: question.name, ttl: 60, class: 'IN' as const, data: [value].flat() }))
        : [];
      const reply = dnsPacket.encode({ type: 'response', id: query.id, flags: AUTHORITATIVE | dnsPacket.RECURSION_DESIRED | rcode, questions: query.questions, answers });
      socket.send(reply, peer.port, peer.address);
    };
    const waiting = held.get(name);
    if (waiting) waiting.push(answer);
    else answer();
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const key = (name: string) => name.toLowerCase().replace(/\.$/, '');
  return {
    address: `127.0.0.1:${socket.address().port}`,
    setTxt: (name, values) => { records.set(key(name), values); },
    fail: (name) => { records.set(key(name), 'fail'); },
    remove: (name) => { records.delete(key(name)); },
    hold: (name) => {
      const waiting: Array<() => void> = [];
      held.set(key(name), waiting);
      return () => {
        held.delete(key(name));
        for (const answer of waiting) answer();
      };
    },
    asked: (name) => questions.get(key(name)) ?? 0,
    close: () => new Promise((resolve) => socket.close(() => resolve())),
  };
}
