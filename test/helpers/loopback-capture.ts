import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { connect as netConnect, createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from './cluster.js';

export interface LoopbackCapture {
  /**
   * Sends a marker in clear through loopback on a port of the capture, waits until the capture
   * file holds it (so every packet before it was written), stops tcpdump and gives back the file's
   * bytes. The marker in them shows the capture saw plaintext; its absence fails the call.
   */
  stop(): Promise<Buffer>;
}

/**
 * Captures the TCP traffic on loopback to and from `ports` with tcpdump (Debian's `tcpdump`,
 * which needs root or CAP_NET_RAW). Resolves once tcpdump says it listens; rejects with tcpdump's
 * own words when it cannot run, for the caller to skip with.
 */
export async function captureLoopback(ports: number[]): Promise<LoopbackCapture> {
  const dir = await mkdtemp(join(tmpdir(), 'troupe-capture-'));
  const file = join(dir, 'lo.pcap');
  // A plaintext sender the capture must see, on a port of its own.
  const marker = `troupe-capture-marker-${randomBytes(8).toString('hex')}`;
  const sink = createServer((socket) => socket.resume());
  await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
  const sinkPort = (sink.address() as AddressInfo).port;
  const filter = `tcp and (${[...ports, sinkPort].map((p) => `port ${p}`).join(' or ')})`;
  // -U: each packet written as it comes; -Z root: tcpdump would otherwise write as its own user, into our temp folder.
  const tcpdump = spawn('tcpdump', ['-i', 'lo', '-U', '-n', '-s', '0', '-Z', 'root', '-w', file, filter], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let said = '';
  tcpdump.stderr.on('data', (chunk: Buffer) => (said += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => {
    tcpdump.once('error', (err) => ((said += err.message), resolve(-1)));
    tcpdump.once('exit', (code) => resolve(code));
  });
  let gone = false;
  void exited.then(() => (gone = true));
  try {
    await waitFor('tcpdump to listen', () => (gone ? Promise.reject(new Error(said.trim())) : said.includes('listening on')), 15_000);
  } catch (err) {
    sink.close();
    tcpdump.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
    throw new Error(`tcpdump cannot capture loopback here: ${(err as Error).message}`, { cause: err });
  }
  return {
    async stop() {
      const sent = netConnect({ host: '127.0.0.1', port: sinkPort }, () => sent.end(marker));
      sent.on('error', () => {});
      await waitFor('the capture to hold the marker sent last', async () => (await readFile(file)).includes(marker), 15_000);
      tcpdump.kill('SIGTERM');
      await exited;
      sink.close();
      const bytes = await readFile(file);
      await rm(dir, { recursive: true, force: true });
      return bytes;
    },
  };
}
