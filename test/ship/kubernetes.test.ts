// deploy/kubernetes (CONTRACT §25, §28): the kustomize base rendered (test/helpers/kustomize.ts, or
// kubectl where installed, which must agree), every object as the API server would check it
// (schemas and unknown fields, test/helpers/kubernetesSchema.ts), what the objects promise each
// other (the Secret's keys are every variable gateway.yaml reads, the Service and the budget select
// the gateway's pods and not the Job's, the grace period outlasts preStop, drain and the longest
// request, the image and the Job's name carry one version, the metrics port is the pod's and never
// the client Service's), the monitoring overlay's ServiceMonitor, and docs/production.md showing
// the files as they are. Then the rendering runs with
// `podman kube play` on the image the Dockerfile builds (test/helpers/containers.ts): the Secret,
// then the migration Job's pod, then the Deployment, on a database of its own; a user registers,
// logs in and gets a guarded 200; `podman kube down` leaves no pod.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { SHUTDOWN_GRACE_MS } from '../../src/cli/start.js';
import { parseConfig } from '../../src/config/load.js';
import { ROOT } from '../helpers/cli.js';
import { describeWithPodman, gatewayImage, podman, run } from '../helpers/containers.js';
import { docsBlock } from '../helpers/docs.js';
import { startEchoUpstream, type EchoUpstream } from '../helpers/echoUpstream.js';
import { eventually, newEmail, newPassword, ownRedisPrefix, testServices, throwawayDatabase, type ThrowawayDatabase } from '../helpers/gateway.js';
import { request } from '../helpers/http.js';
import { apiProblems } from '../helpers/kubernetesSchema.js';
import { kustomizeBuild, type K8sObject } from '../helpers/kustomize.js';
import { sparePort } from '../helpers/ports.js';

const DIR = path.join(ROOT, 'deploy/kubernetes');
const BASE = path.join(DIR, 'base');
const objects = kustomizeBuild(DIR);
/** kustomization.yaml's images: the version every container runs. */
const TAG = (parse(readFileSync(path.join(BASE, 'kustomization.yaml'), 'utf8')) as { images: Array<{ name: string; newTag: string }> }).images[0]!.newTag;
const find = (kind: string) => objects.find((object) => object.kind === kind)!;
/** The gateway.yaml the ConfigMap holds, as the pods read it. */
const gatewayYaml = () => (find('ConfigMap').data as Record<string, string>)['gateway.yaml']!;

/** The fields of a pod template this file reads and, for Podman, changes. */
interface Probe { httpGet: { path: string; port: string | number } }
interface Container {
  name: string; image: string; command?: string[]; ports?: Array<{ name: string; containerPort: number }>;
  env: Array<{ name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean } } }>;
  readinessProbe?: Probe; livenessProbe?: Probe; lifecycle?: { preStop: { exec: { command: string[] } } };
  securityContext?: Record<string, unknown>; volumeMounts: Array<{ name: string; mountPath: string }>;
}
interface PodSpec {
  containers: Container[]; volumes: Array<{ name: string; configMap?: { name: string } }>;
  hostNetwork?: boolean; securityContext?: Record<string, unknown>; terminationGracePeriodSeconds?: number;
}
const podSpec = (object: K8sObject) => (object.spec as { template: { metadata: { labels: Record<string, string>; annotations?: Record<string, string> }; spec: PodSpec } }).template;

/**
 * The variables a gateway.yaml names, its commented blocks' included: DATABASE_URL → whether the
 * gateway can start without it (it has a default, `${VAR:-…}`, or is only in a comment).
 */
function variables(text: string): Map<string, boolean> {
  const named = new Map<string, boolean>();
  for (const line of text.split('\n')) {
    const commented = /^\s*#/.test(line);
    for (const m of line.matchAll(/\$\{(\w+)(:-)?/g)) named.set(m[1]!, (named.get(m[1]!) ?? true) && (commented || m[2] !== undefined));
  }
  return named;
}

/** gateway.yaml with its commented blocks turned on (`# key:` at the start of a line, and the lines under it). */
const uncommented = (text: string) => text.replace(/^# ( *[\w-]+:.*)$/gm, '$1').replace(/^# ( {2,}.*)$/gm, '$1');

/** The Secret's keys a container reads: DATABASE_URL → optional. */
function secretKeys(container: Container): Map<string, boolean> {
  return new Map(container.env.flatMap(({ valueFrom }) => (valueFrom?.secretKeyRef ? [[valueFrom.secretKeyRef.key, !!valueFrom.secretKeyRef.optional] as const] : [])));
}

/** The docs' apply steps: the Secret's keys, then each `kubectl` command. */
function docsSteps(): { secretKeys: string[]; commands: string[] } {
  const block = docsBlock('production', 'kubernetes-apply').replace(/\\\n\s*/g, ' ');
  const commands = block.split('\n').filter((line) => line.startsWith('kubectl ')).map((line) => line.replace(/\s+#.*$/, ''));
  return { secretKeys: [...commands[0]!.matchAll(/--from-literal=(\w+)=/g)].map((m) => m[1]!), commands };
}

/** Whether labels satisfy a selector of the docs' form, `key!=value` or `key=value` (what `kubectl apply -l` takes). */
function selects(selector: string, labels: Record<string, string> = {}): boolean {
  const [, key, not, value] = /^([\w./-]+)(!?)==?([\w.-]+)$/.exec(selector) ?? [];
  if (!key) throw new Error(`selector ${selector}: only key=value and key!=value are read here`);
  return (labels[key] === value) !== (not === '!');
}

describe('deploy/kubernetes, rendered', () => {
  it('is a ConfigMap made from its gateway.yaml, the Deployment, the Service, the disruption budget and the migration Job', () => {
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([
      expect.stringMatching(/^ConfigMap\/auth-gateway-config-[a-z0-9]{10}$/), 'Deployment/auth-gateway', 'Service/auth-gateway',
      'PodDisruptionBudget/auth-gateway', 'Job/auth-gateway-migrate-1-0-0',
    ]);
    expect(find('ConfigMap').data).toEqual({ 'gateway.yaml': readFileSync(path.join(BASE, 'gateway.yaml'), 'utf8') });
    for (const kind of ['Deployment', 'Job']) {
      expect(podSpec(find(kind)).spec.volumes).toContainEqual({ name: 'config', configMap: { name: find('ConfigMap').metadata.name } });
    }
  });

  it('passes the Kubernetes API\'s schemas with no unknown field; a misspelt field or a wrong type would not', async () => {
    for (const object of objects) expect(await apiProblems(object), `${object.kind}/${object.metadata.name}`).toEqual([]);
    const broken = structuredClone(find('Deployment')) as K8sObject & { spec: { replicas: unknown } };
    broken.spec.replicas = 'three';
    Object.assign(podSpec(broken).spec.containers[0]!, { readinessprobe: podSpec(broken).spec.containers[0]!.readinessProbe });
    expect(await apiProblems(broken)).toEqual(['/spec/replicas: type {"type":"integer"}', '/spec/template/spec/containers/0/readinessprobe: unknown field']);
  });

  const kubectl = spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0;
  if (!kubectl) console.warn('\n[tests] kubectl not installed: the rendering is not compared with `kubectl kustomize`\n');
  it.runIf(kubectl)('renders as `kubectl kustomize` does, the base and the monitoring overlay', () => {
    const key = (o: K8sObject) => `${o.kind}/${o.metadata.name}`;
    const sorted = (list: K8sObject[]) => [...list].sort((a, b) => key(a).localeCompare(key(b)));
    for (const dir of [DIR, BASE, path.join(DIR, 'monitoring')]) {
      const rendered = spawnSync('kubectl', ['kustomize', dir], { encoding: 'utf8' });
      expect(rendered.status, rendered.stderr).toBe(0);
      expect(sorted(parseAllDocuments(rendered.stdout).map((doc) => doc.toJS() as K8sObject)), dir).toEqual(sorted(kustomizeBuild(dir)));
    }
  });

  it('runs 3 gateway pods, ready on /readyz, alive on /healthz, as uid 1000 on a read-only root with tmp and data volumes', () => {
    const deployment = find('Deployment') as K8sObject & { spec: { replicas: number } };
    expect(deployment.spec.replicas).toBe(3);
    const { spec } = podSpec(deployment);
    const [gateway] = spec.containers;
    expect(gateway!.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'http' });
    expect(gateway!.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(gateway!.ports).toEqual([{ name: 'http', containerPort: 8080 }, { name: 'metrics', containerPort: 9464 }]);
    expect(parseConfig(gatewayYaml(), 'gateway.yaml', { DATABASE_URL: 'postgres://x@db/gateway' }).server.port).toBe(8080);
    expect(spec.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000 });
    expect(gateway!.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
    expect(gateway!.volumeMounts.map((m) => m.mountPath)).toEqual(['/etc/auth-gateway', '/tmp', '/app/data']);
  });

  it('gives a stopping pod longer than its preStop, the gateway\'s drain and the time it then gives requests in flight', () => {
    const { spec } = podSpec(find('Deployment'));
    const config = parseConfig(gatewayYaml(), 'gateway.yaml', { DATABASE_URL: 'postgres://x@db/gateway' });
    const preStop = spec.containers[0]!.lifecycle!.preStop.exec.command;
    expect(preStop).toEqual(['sleep', expect.stringMatching(/^\d+$/)]);
    expect(config.server.shutdownDelay).toBeGreaterThan(0);
    expect(spec.terminationGracePeriodSeconds! * 1000).toBeGreaterThan(Number(preStop[1]) * 1000 + config.server.shutdownDelay + SHUTDOWN_GRACE_MS);
  });

  it('reads from the one Secret each variable gateway.yaml names but the upstream, its commented blocks\' too, required only without a default; migrates only in the Job', () => {
    const text = gatewayYaml();
    const named = variables(text);
    expect(named.get('APP_UPSTREAM')).toBe(true);
    named.delete('APP_UPSTREAM');
    // What an operator turns on needs no patch of the Deployment: the database, Redis, JWT, the
    // admin key, the metrics token, SMTP, Stripe and the hooks all come from the Secret.
    expect([...named.keys()]).toEqual(expect.arrayContaining([
      'DATABASE_URL', 'REDIS_URL', 'JWT_SECRET', 'GATEWAY_ADMIN_KEY', 'METRICS_TOKEN', 'SMTP_URL', 'STRIPE_SECRET_KEY', 'STRIPE_WEBHOOK_SECRET', 'GATEWAY_HOOKS_SECRET',
    ]));
    const [gateway] = podSpec(find('Deployment')).spec.containers;
    expect(secretKeys(gateway!)).toEqual(new Map([...named].map(([name, optional]) => [name, optional])));
    expect(new Set(gateway!.env.flatMap((e) => e.valueFrom?.secretKeyRef?.name ?? []))).toEqual(new Set(['auth-gateway']));
    // The commented blocks are a valid configuration once turned on, with their variables set.
    const env = Object.fromEntries([...named.keys()].map((name) => [name, name === 'SMTP_URL' ? 'smtp://mail:587' : name.startsWith('STRIPE_SECRET') ? 'sk_test_x'
      : /HOOKS_URL/.test(name) ? 'https://hooks.example.com/in' : /WEBHOOK|HOOKS/.test(name) ? 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' : `${name}-0123456789abcdef-0123456789abcdef`]));
    Object.assign(env, { DATABASE_URL: 'postgres://x@db/gateway', REDIS_URL: 'redis://redis:6379' });
    const on = parseConfig(uncommented(text), 'gateway.yaml', env);
    expect([on.mail?.smtp, on.billing?.stripe.secretKey, on.hooks?.url, on.metrics.token]).toEqual(['smtp://mail:587', 'sk_test_x', 'https://hooks.example.com/in', env.METRICS_TOKEN]);
    expect(gateway!.env).toContainEqual({ name: 'GATEWAY_CONFIG', value: '/etc/auth-gateway/gateway.yaml' });
    expect(parseConfig(text, 'gateway.yaml', { DATABASE_URL: 'postgres://x@db/gateway' }).storage.migrate).toBe(false);
    const [migrate] = podSpec(find('Job')).spec.containers;
    expect(migrate!.command).toEqual(['node', 'dist/cli.js', 'migrate']);
    expect(migrate!.env).toContainEqual({ name: 'GATEWAY_CONFIG', value: '/etc/auth-gateway/gateway.yaml' });
    expect(secretKeys(migrate!)).toEqual(new Map([['DATABASE_URL', false]]));
  });

  it('has the Service and the disruption budget select the gateway\'s pods, not the migration\'s', () => {
    const labels = (kind: string) => podSpec(find(kind)).metadata.labels;
    const matches = (selector: Record<string, string>, of: Record<string, string>) => Object.entries(selector).every(([k, v]) => of[k] === v);
    const service = (find('Service').spec as { selector: Record<string, string> }).selector;
    const budget = (find('PodDisruptionBudget').spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels;
    for (const selector of [service, budget, (find('Deployment').spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels]) {
      expect(matches(selector, labels('Deployment'))).toBe(true);
      expect(matches(selector, labels('Job'))).toBe(false);
    }
  });

  it('runs the image by version through kustomize images: (never latest), and names the migration Job after it', () => {
    // The package's version: a release moves the tag and the Job's name with it.
    expect(TAG).toBe((JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version);
    for (const kind of ['Deployment', 'Job']) {
      for (const container of podSpec(find(kind)).spec.containers) expect(container.image, kind).toBe(`auth-gateway:${TAG}`);
    }
    // A new version is a new Job: applying it never updates the last one's pod template (immutable).
    expect(find('Job').metadata.name).toBe(`auth-gateway-migrate-${TAG.replaceAll('.', '-')}`);
    for (const file of ['deployment.yaml', 'migrate-job.yaml']) expect(readFileSync(path.join(BASE, file), 'utf8')).not.toMatch(/image: \S+:/);
  });

  it('exposes the metrics listener on the pod (named port, prometheus.io annotations), never on the client Service', () => {
    const config = parseConfig(gatewayYaml(), 'gateway.yaml', { DATABASE_URL: 'postgres://x@db/gateway' });
    const template = podSpec(find('Deployment'));
    const port = template.spec.containers[0]!.ports!.find((p) => p.name === 'metrics')!;
    expect([config.metrics.host, config.metrics.port]).toEqual(['0.0.0.0', port.containerPort]);
    expect(config.admin.host).toBe('127.0.0.1');
    expect(template.metadata.annotations).toEqual({ 'prometheus.io/scrape': 'true', 'prometheus.io/port': String(port.containerPort), 'prometheus.io/path': '/metrics' });
    const servicePorts = (find('Service').spec as { ports: Array<{ name: string; port: number; targetPort: string | number }> }).ports;
    expect(servicePorts).toEqual([{ name: 'http', port: 80, targetPort: 'http' }]);
  });

  it('has a monitoring overlay beside the base: the base, a headless Service of the metrics port and a ServiceMonitor sending the token', async () => {
    // docs/production.md's command, rendered as kubectl apply -k would (no cluster here).
    const [command, overlayDir] = /^kubectl apply -k (\S+)\n$/.exec(docsBlock('production', 'kubernetes-monitoring'))!;
    expect(command).toBeTruthy();
    const overlay = path.join(ROOT, overlayDir!);
    expect(overlay).toBe(path.join(DIR, 'monitoring'));
    expect(readFileSync(path.join(overlay, 'kustomization.yaml'), 'utf8')).not.toMatch(/^kind: Component$/m);
    const monitored = kustomizeBuild(overlay);
    expect(monitored.slice(0, objects.length)).toEqual(objects);
    const added = monitored.slice(objects.length);
    expect(added.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual(['Service/auth-gateway-metrics', 'ServiceMonitor/auth-gateway']);
    const [service, monitor] = added as [K8sObject, K8sObject];
    expect(await apiProblems(service)).toEqual([]);
    const serviceSpec = service.spec as { clusterIP: string; selector: Record<string, string>; ports: Array<{ name: string; targetPort: string }> };
    expect(serviceSpec.clusterIP).toBe('None');
    expect(serviceSpec.ports.map((p) => [p.name, p.targetPort])).toEqual([['metrics', 'metrics']]);
    const podLabels = podSpec(find('Deployment')).metadata.labels;
    expect(Object.entries(serviceSpec.selector).every(([k, v]) => podLabels[k] === v)).toBe(true);
    // The ServiceMonitor selects the metrics Service, and not the one carrying client traffic.
    const spec = monitor.spec as { selector: { matchLabels: Record<string, string> }; endpoints: Array<Record<string, unknown>> };
    const selected = (o: K8sObject) => Object.entries(spec.selector.matchLabels).every(([k, v]) => o.metadata.labels?.[k] === v);
    expect(monitored.filter((o) => o.kind === 'Service' && selected(o)).map((o) => o.metadata.name)).toEqual(['auth-gateway-metrics']);
    expect(monitor.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(spec.endpoints).toEqual([{ port: 'metrics', path: '/metrics', interval: '30s', authorization: { type: 'Bearer', credentials: { name: 'auth-gateway', key: 'METRICS_TOKEN' } } }]);
    expect(secretKeys(podSpec(find('Deployment')).spec.containers[0]!).has('METRICS_TOKEN')).toBe(true);
  });

  it('is applied as docs/production.md says: the Secret, then the ConfigMap and the Job, then the rest; the docs show the files as they are', () => {
    const { secretKeys: documented, commands } = docsSteps();
    const read = secretKeys(podSpec(find('Deployment')).spec.containers[0]!);
    // Every key the pods need is documented; the others are there to add when a block is turned on.
    expect(read.get(documented[0]!)).toBe(false);
    expect(documented.every((key) => read.has(key))).toBe(true);
    expect([...read].filter(([, optional]) => !optional).map(([key]) => key)).toEqual(['DATABASE_URL']);
    expect(commands[0]).toMatch(/^kubectl create secret generic auth-gateway /);
    const first = /^kubectl apply -k deploy\/kubernetes -l (.+)$/.exec(commands[1]!);
    expect(objects.filter((o) => selects(first![1]!, o.metadata.labels)).map((o) => o.kind)).toEqual(['ConfigMap', 'Job']);
    expect(commands.slice(2)).toEqual([
      'kubectl wait --for=condition=complete job/auth-gateway-migrate-1-0-0 --timeout=5m', 'kubectl apply -k deploy/kubernetes',
      'kubectl rollout status deployment/auth-gateway',
    ]);
    for (const [name, file] of [['kubernetes-kustomization', 'kustomization.yaml'], ['kubernetes-deployment', 'deployment.yaml'], ['kubernetes-migrate-job', 'migrate-job.yaml']]) {
      expect(docsBlock('production', name!), file).toBe(readFileSync(path.join(BASE, file!), 'utf8'));
    }
  });
});

/**
 * The rendered objects as this machine's Podman plays them, changed only where a test run must:
 * names of the run's own, the image just built, the host's network (the shared Postgres and Redis
 * listen on its loopback) and so the ports the test picked (PORT, ADMIN_PORT, METRICS_PORT and
 * METRICS_HOST on the loopback; the container ports dropped, probes on the port itself), one replica (three would share one address), the Redis
 * prefix of the run, and the Job as the pod it makes (Podman 4 plays no Job).
 */
function forPodman(id: string, image: string, env: Record<string, string>): { migrate: string; gateway: string; secret: string } {
  const rendered = structuredClone(objects);
  const configMap = rendered.find((o) => o.kind === 'ConfigMap')!;
  const secret = `auth-gateway-${id}`;
  configMap.metadata.name += `-${id}`;
  const adapt = (object: K8sObject) => {
    const { spec } = podSpec(object);
    spec.hostNetwork = true;
    spec.volumes.find((v) => v.name === 'config')!.configMap!.name = configMap.metadata.name;
    for (const container of spec.containers) {
      container.image = image;
      for (const variable of container.env) if (variable.valueFrom?.secretKeyRef) variable.valueFrom.secretKeyRef.name = secret;
      container.env.push(...Object.entries(env).map(([name, value]) => ({ name, value })));
      delete container.ports;
      for (const probe of [container.readinessProbe, container.livenessProbe]) if (probe) probe.httpGet.port = Number(env.PORT);
    }
  };
  const deployment = rendered.find((o) => o.kind === 'Deployment')!;
  deployment.metadata.name += `-${id}`;
  (deployment.spec as { replicas: number }).replicas = 1;
  adapt(deployment);
  const job = rendered.find((o) => o.kind === 'Job')!;
  adapt(job);
  const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: `${job.metadata.name}-${id}`, labels: podSpec(job).metadata.labels }, spec: podSpec(job).spec };
  const yaml = (...docs: unknown[]) => docs.map((doc) => stringify(doc)).join('---\n');
  return { migrate: yaml(configMap, pod), gateway: yaml(configMap, deployment), secret };
}

const id = randomBytes(4).toString('hex');
const METRICS_TOKEN = randomBytes(24).toString('base64url');
const work = mkdtempSync(path.join(tmpdir(), 'gw-kube-'));
const files = { migrate: path.join(work, 'migrate.yaml'), gateway: path.join(work, 'gateway.yaml'), secret: path.join(work, 'secret.json') };
let db: ThrowawayDatabase;
let upstream: EchoUpstream;
let base: string;
let metricsBase: string;
let secret: string;

// catatonit: the pause process of the pods' infra container, which Podman builds on first use.
describeWithPodman('the kubernetes test', ['catatonit'])('deploy/kubernetes with podman kube play', () => {
  beforeAll(async () => {
    const { tag } = await gatewayImage();
    [db, upstream] = await Promise.all([throwawayDatabase(), startEchoUpstream()]);
    const [port, adminPort, metricsPort] = [await sparePort(), await sparePort(), await sparePort()];
    base = `http://127.0.0.1:${port}`;
    metricsBase = `http://127.0.0.1:${metricsPort}`;
    const env = {
      PORT: String(port), ADMIN_PORT: String(adminPort), METRICS_PORT: String(metricsPort), METRICS_HOST: '127.0.0.1', APP_UPSTREAM: upstream.url, REDIS_KEY_PREFIX: ownRedisPrefix('kube'),
    };
    const played = forPodman(id, tag, env);
    secret = played.secret;
    writeFileSync(files.migrate, played.migrate);
    writeFileSync(files.gateway, played.gateway);
    // The docs' Secret, in the form Podman 4 reads a Kubernetes Secret from its own store: key → base64;
    // every key the pods read is there (empty where the docs set none), as Podman reads optional ones too.
    const values: Record<string, string> = { DATABASE_URL: db.url, REDIS_URL: testServices!.redis, JWT_SECRET: randomBytes(48).toString('base64'), METRICS_TOKEN: METRICS_TOKEN };
    expect(docsSteps().secretKeys).toContain('METRICS_TOKEN');
    const keys = secretKeys(podSpec(find('Deployment')).spec.containers[0]!).keys();
    writeFileSync(files.secret, JSON.stringify(Object.fromEntries([...keys].map((key) => [key, Buffer.from(values[key] ?? '').toString('base64')]))));
    await podman('secret', 'create', secret, files.secret);
  }, 900_000);

  afterAll(async () => {
    for (const file of [files.gateway, files.migrate]) await run('podman', ['kube', 'down', file]);
    await run('podman', ['secret', 'rm', secret]);
    rmSync(work, { recursive: true, force: true });
    await upstream?.close();
    await db?.drop();
  }, 120_000);

  it('migrates the database in the Job\'s pod, which exits 0', async () => {
    const started = Date.now();
    await podman('kube', 'play', files.migrate);
    const container = `${find('Job').metadata.name}-${id}-migrate`;
    expect((await podman('wait', container)).trim()).toBe('0');
    expect(await podman('logs', container)).toMatch(/^applied: 001_/);
    expect((await db.sql<{ n: number }>('SELECT count(*)::int AS n FROM schema_migrations'))[0]!.n).toBeGreaterThan(0);
    console.log(`[kube] migrated ${Math.round((Date.now() - started) / 1000)} s after podman kube play`);
  }, 120_000);

  it('then runs the Deployment: ready on /readyz with Postgres and Redis, as uid 1000 on a read-only root', async () => {
    const started = Date.now();
    await podman('kube', 'play', files.gateway);
    await eventually(async () => (await request(base, 'GET', '/readyz').catch(() => null))?.status === 200, 60_000, 250);
    console.log(`[kube] ready ${Math.round((Date.now() - started) / 1000)} s after podman kube play`);
    expect((await request(base, 'GET', '/readyz')).json).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'ok' } });
    // The metrics listener, with the Secret's token (what the monitoring overlay's ServiceMonitor sends).
    expect((await request(metricsBase, 'GET', '/metrics')).status).toBe(401);
    const scraped = await request(metricsBase, 'GET', '/metrics', { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(scraped.status).toBe(200);
    expect(scraped.text).toContain('gateway_storage_up{store="postgres"} 1');
    const container = `auth-gateway-${id}-pod-0-gateway`;
    expect((await podman('exec', container, 'id', '-u')).trim()).toBe('1000');
    expect((await run('podman', ['exec', container, 'touch', '/app/dist/x'])).stderr).toContain('Read-only file system');
  }, 120_000);

  it('gives a guarded 200 after register and login, and 401 without a token', async () => {
    expect((await request(base, 'GET', '/api/v1/races')).status).toBe(401);
    const [email, password] = [newEmail(), newPassword()];
    expect((await request(base, 'POST', '/api/v1/auth/register', { json: { email, password } })).status).toBe(201);
    const login = await request(base, 'POST', '/api/v1/auth/login', { json: { email, password } });
    const guarded = await request(base, 'GET', '/api/v1/races', { headers: { authorization: `Bearer ${login.json.access_token}` } });
    expect(guarded.status).toBe(200);
    expect(upstream.hits.at(-1)?.headers['x-user-email']).toBe(email);
  });

  it('runs its preStop command in the image (Podman does not run hooks: run here as Kubernetes would), then kube down removes the pods', async () => {
    const started = Date.now();
    const preStop = podSpec(find('Deployment')).spec.containers[0]!.lifecycle!.preStop.exec.command;
    await podman('exec', `auth-gateway-${id}-pod-0-gateway`, ...preStop);
    expect(Date.now() - started).toBeGreaterThanOrEqual(Number(preStop[1]) * 1000 - 100);
    for (const file of [files.gateway, files.migrate]) await podman('kube', 'down', file);
    expect(await podman('pod', 'ps', '--filter', `name=${id}`, '--format', '{{.Name}}')).toBe('');
  }, 60_000);
});
