import assert from 'node:assert/strict';
import { readFile, readdir } from 'node:fs/promises';
import { describe, test } from 'node:test';
import { DaemonSet } from 'kubernetes-models/apps/v1/DaemonSet';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { PersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { parseAllDocuments } from 'yaml';

/**
 * deploy/k8s: every object is checked against the Kubernetes API schema (kubernetes-models,
 * generated from the Kubernetes OpenAPI spec: required fields, types, enums), then the things
 * Troupe needs of them are checked by path. The schema does not flag misspelt optional fields, so
 * each field that matters is asserted where it must be.
 */

const DIR = new URL('../../../deploy/k8s/', import.meta.url);

// Any manifest: the tests read it by path, the schema check has already vouched for its shape.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a manifest of any kind, read field by field
type Manifest = any;

const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'v1/Namespace': Namespace,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/PersistentVolumeClaim': PersistentVolumeClaim,
  'apps/v1/Deployment': Deployment,
  'apps/v1/DaemonSet': DaemonSet,
};

async function load(): Promise<{ file: string; doc: Manifest }[]> {
  const out: { file: string; doc: Manifest }[] = [];
  for (const file of (await readdir(DIR)).filter((f) => f.endsWith('.yaml')).sort()) {
    for (const parsed of parseAllDocuments(await readFile(new URL(file, DIR), 'utf8'))) {
      assert.deepEqual(parsed.errors, [], `${file} is valid YAML`);
      const doc = parsed.toJS() as Manifest;
      if (doc !== null) out.push({ file, doc });
    }
  }
  return out;
}

const docs = await load();
const objects = docs.filter((d) => d.doc.kind !== 'Kustomization');
const find = (kind: string, name: string): Manifest => {
  const found = objects.find((d) => d.doc.kind === kind && d.doc.metadata?.name === name)?.doc;
  assert.ok(found, `${kind} ${name} is defined`);
  return found;
};
const envOf = (container: Manifest, name: string): Manifest => container.env?.find((e: Manifest) => e.name === name);

describe('Kubernetes manifests (deploy/k8s)', () => {
  test('every object passes the Kubernetes API schema', () => {
    assert.ok(objects.length >= 6);
    for (const { file, doc } of objects) {
      const Model = MODELS[`${doc.apiVersion}/${doc.kind}`];
      assert.ok(Model, `${file}: no schema for ${doc.apiVersion} ${doc.kind}`);
      assert.doesNotThrow(() => new Model(doc as never).validate(), `${file}: ${doc.kind} ${doc.metadata?.name}`);
      assert.equal(
        doc.metadata?.namespace ?? (doc.kind === 'Namespace' ? undefined : 'missing'),
        doc.kind === 'Namespace' ? undefined : 'troupe',
        `${file}: ${doc.kind} lives in namespace troupe`,
      );
    }
  });

  test('the schema check is real: a wrong type is refused', () => {
    const broken = structuredClone(find('Deployment', 'troupe-head'));
    broken.spec.template.spec.containers[0].ports[0].containerPort = 'eighty';
    assert.throws(() => new Deployment(broken).validate(), /containerPort must be integer/);
  });

  test('kustomization lists every manifest but the example Secret', async () => {
    const k = docs.find((d) => d.doc.kind === 'Kustomization')?.doc;
    assert.ok(k, 'kustomization.yaml');
    const files = (await readdir(DIR)).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml' && f !== 'secret.example.yaml');
    assert.deepEqual([...k.resources].sort(), files.sort());
    assert.equal(k.namespace, 'troupe');
  });

  test('the head: a Deployment with probes on its health endpoints, the token from a Secret, scrape annotations', () => {
    const head = find('Deployment', 'troupe-head');
    const pod = head.spec.template;
    const [c] = pod.spec.containers;
    assert.equal(head.spec.replicas, 1, 'one head');
    assert.equal(head.spec.strategy.type, 'Recreate', 'never two heads at once');
    assert.equal(c.args[0], 'head');
    const port = c.ports.find((p: Manifest) => p.containerPort === 8470);
    assert.ok(port, 'listens on 8470');
    // The probes ask the port --probe-port opens, one the container declares.
    const probes = c.ports.find((p: Manifest) => p.name === 'probes');
    assert.ok(probes, 'declares the probe port');
    assert.equal(c.args[c.args.indexOf('--probe-port') + 1], String(probes.containerPort));
    assert.deepEqual(c.readinessProbe.httpGet, { path: '/readyz', port: 'probes' });
    assert.deepEqual(c.livenessProbe.httpGet, { path: '/healthz', port: 'probes' });
    assert.equal(envOf(c, 'TROUPE_HOST').value, '0.0.0.0');
    assert.deepEqual(envOf(c, 'TROUPE_TOKEN').valueFrom, { secretKeyRef: { name: 'troupe-token', key: 'token' } });
    assert.deepEqual(pod.metadata.annotations, {
      'prometheus.io/scrape': 'true',
      'prometheus.io/port': '8470',
      'prometheus.io/path': '/metrics',
    });
    assert.equal(pod.spec.securityContext.runAsNonRoot, true);
    assert.notEqual(pod.spec.securityContext.runAsUser, 0);
    // The data directory (uploads, the state file) is on the claim.
    const dataDir = c.args[c.args.indexOf('--data-dir') + 1] as string;
    const mount = c.volumeMounts.find((m: Manifest) => dataDir.startsWith(m.mountPath));
    const volume = pod.spec.volumes.find((v: Manifest) => v.name === mount?.name);
    assert.equal(volume?.persistentVolumeClaim?.claimName, find('PersistentVolumeClaim', 'troupe-head-data').metadata.name);
  });

  test('the Services select the head pod; the agents use the one that does not wait for readiness', () => {
    const podLabels = find('Deployment', 'troupe-head').spec.template.metadata.labels;
    for (const name of ['troupe-head', 'troupe-head-agents']) {
      const svc = find('Service', name);
      for (const [k, v] of Object.entries(svc.spec.selector)) assert.equal(podLabels[k], v, `${name} selects the head pod`);
      // Clients reach the gRPC inference service through the head's Service; agents need only HTTP.
      assert.deepEqual(
        svc.spec.ports.map((p: Manifest) => [p.port, p.targetPort]),
        name === 'troupe-head'
          ? [
              [8470, 'http'],
              [8471, 'grpc'],
            ]
          : [[8470, 'http']],
      );
    }
    // /readyz is 503 until a node is ALIVE, and nodes become ALIVE by connecting: the agents'
    // Service must not wait for it.
    assert.equal(find('Service', 'troupe-head-agents').spec.publishNotReadyAddresses, true);
    assert.equal(find('Service', 'troupe-head').spec.publishNotReadyAddresses, undefined);
    assert.equal(find('Service', 'troupe-head').metadata.annotations['prometheus.io/scrape'], 'true');
  });

  test('the agents: a DaemonSet on GPU nodes requesting nvidia.com/gpu, joining the head with the token and advertising the node IP', () => {
    const ds = find('DaemonSet', 'troupe-agent');
    const pod = ds.spec.template.spec;
    const [c] = pod.containers;
    assert.equal(pod.nodeSelector['nvidia.com/gpu.present'], 'true');
    assert.ok(
      pod.tolerations.some((t: Manifest) => t.key === 'nvidia.com/gpu'),
      'tolerates the GPU taint',
    );
    assert.ok(Number(c.resources.limits['nvidia.com/gpu']) >= 1, 'requests GPUs');
    assert.match(c.image, /gpu/, 'the GPU image');
    assert.equal(c.args[0], 'agent');
    const flag = (name: string) => c.args[c.args.indexOf(name) + 1] as string;
    const headUrl = new URL(flag('--head'));
    assert.equal(headUrl.protocol, 'ws:');
    assert.equal(headUrl.hostname, `troupe-head-agents.${ds.metadata.namespace}.svc`);
    assert.equal(headUrl.port, '8470');
    assert.equal(flag('--advertise'), '$(NODE_IP)');
    assert.deepEqual(envOf(c, 'NODE_IP').valueFrom, { fieldRef: { fieldPath: 'status.hostIP' } });
    assert.equal(flag('--name'), '$(NODE_NAME)');
    assert.deepEqual(envOf(c, 'NODE_NAME').valueFrom, { fieldRef: { fieldPath: 'spec.nodeName' } });
    assert.deepEqual(envOf(c, 'TROUPE_TOKEN').valueFrom, { secretKeyRef: { name: 'troupe-token', key: 'token' } });
    assert.equal(pod.securityContext.runAsNonRoot, true);
    // Kubernetes expands $(VAR) in args only for variables the container defines.
    for (const arg of c.args as string[])
      for (const [, name] of arg.matchAll(/\$\(([A-Z_]+)\)/g)) assert.ok(envOf(c, name!), `${name} is defined for the args`);
  });

  test('the example Secret holds the key the head and agents read', () => {
    const secret = find('Secret', 'troupe-token');
    assert.ok(typeof secret.stringData.token === 'string');
  });
});
