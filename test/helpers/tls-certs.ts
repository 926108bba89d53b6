import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Files of a test PKI: a CA, a server certificate for localhost and 127.0.0.1, and a client certificate, each with its key. */
export interface TestPki {
  dir: string;
  caCert: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** A second CA, which signed nothing the cluster uses: what a stranger's certificate chains to. */
  otherCaCert: string;
  /** A client certificate the second CA signed. */
  otherClientCert: string;
  otherClientKey: string;
  /** The CA certificate's PEM text. */
  ca: Buffer;
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A CA whose certificate says it is one (basicConstraints), in `name`.pem and `name`.key. */
function makeCa(dir: string, name: string): void {
  openssl(dir, [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.pem`,
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
}

/** A leaf certificate `name`.pem (key `name`.key) signed by CA `ca`, with the extensions in `ext`. */
async function makeLeaf(dir: string, name: string, ca: string, subject: string, ext: string): Promise<void> {
  await writeFile(join(dir, `${name}.ext`), ext);
  openssl(dir, [
    'req',
    '-new',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.csr`,
    '-subj',
    subject,
  ]);
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${ca}.pem`,
    '-CAkey',
    `${ca}.key`,
    '-CAcreateserial',
    '-out',
    `${name}.pem`,
    '-days',
    '2',
    '-extfile',
    `${name}.ext`,
  ]);
}

/**
 * Makes a PKI with Debian's `openssl` in a fresh temporary directory: nothing is checked in, and
 * every run has keys of its own. EC keys, so it takes a fraction of a second.
 */
export async function makeTestPki(): Promise<TestPki> {
  const dir = await mkdtemp(join(tmpdir(), 'troupe-tls-'));
  makeCa(dir, 'ca');
  makeCa(dir, 'other-ca');
  await makeLeaf(dir, 'server', 'ca', '/CN=localhost', 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  await makeLeaf(dir, 'client', 'ca', '/CN=agent', 'extendedKeyUsage=clientAuth\n');
  await makeLeaf(dir, 'other-client', 'other-ca', '/CN=stranger', 'extendedKeyUsage=clientAuth\n');
  const at = (file: string) => join(dir, file);
  return {
    dir,
    caCert: at('ca.pem'),
    serverCert: at('server.pem'),
    serverKey: at('server.key'),
    clientCert: at('client.pem'),
    clientKey: at('client.key'),
    otherCaCert: at('other-ca.pem'),
    otherClientCert: at('other-client.pem'),
    otherClientKey: at('other-client.key'),
    ca: await readFile(at('ca.pem')),
  };
}
