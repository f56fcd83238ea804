/* ts_sg_shim: the C++ side of the simgrid backend, kept to what SimGrid 3.32's C API cannot
 * do: a netzone with caller-computed routes, actors running a C closure, mailbox exchanges
 * that report each flow's interval, host-to-host flows, sealing, and initialisation and
 * configuration guarded so that nothing SimGrid prints or aborts on reaches the user. */
#include "ts_sg_shim.h"
#include "ts_util.h"

#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/kernel/Timer.hpp>
#include <simgrid/kernel/routing/NetPoint.hpp>
#include <simgrid/kernel/routing/NetZoneImpl.hpp>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <simgrid/s4u/Mailbox.hpp>
#include <xbt/asserts.h>
#include <xbt/config.hpp>
#include <xbt/log.h>

#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>
#include <exception>
#include <string>
#include <vector>

namespace sg4 = simgrid::s4u;
namespace sgr = simgrid::kernel::routing;

static sg4::Engine *engine = nullptr;
static int actors_alive = 0;

/* Where SimGrid's output goes: /dev/null, or the file named by TS_SIMGRID_LOG. */
static const char *log_target(void)
{
  const char *log = g_getenv("TS_SIMGRID_LOG");
  return log != nullptr && *log ? log : "/dev/null";
}

/* While SimGrid code runs, file descriptor 2 points at the log target. Its logging goes there
 * already, but a failed xbt_assert, an uncaught exception or a crash handler writes to stderr
 * directly before aborting; this keeps those from the user as well (the caller reports the
 * failure in one line). Nests; restores stderr when the outermost scope ends. */
class Quiet
{
public:
  Quiet()
  {
    if (depth_++ > 0)
      return;
    fflush(stderr);
    saved_ = dup(2);
    int fd = open(log_target(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      dup2(fd, 2);
      close(fd);
    }
  }
  ~Quiet()
  {
    if (--depth_ > 0 || saved_ < 0)
      return;
    fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    saved_ = -1;
  }
  Quiet(const Quiet &) = delete;
  Quiet &operator=(const Quiet &) = delete;

private:
  static int depth_, saved_;
};
int Quiet::depth_ = 0;
int Quiet::saved_ = -1;

/* Model names SimGrid 3.32 accepts (src/surf/surf_interface.cpp, the *_model_description
 * tables). An unknown name makes SimGrid call xbt_die when the platform is created, which
 * aborts the process; checking here turns that into a one-line input error. */
static const char *const network_models[] = {"LV08", "Constant", "SMPI", "IB",
                                             "CM02", "ns-3",     nullptr};
static const char *const cpu_models[] = {"Cas01", nullptr};
static const char *const host_models[] = {"default", "compound", "ptask_L07", nullptr};
static const char *const disk_models[] = {"default", nullptr};
static const char *const optim_modes[] = {"Lazy", "TI", "Full", nullptr};
static const char *const factories[] = {"raw", "thread", "boost", "ucontext", nullptr};

static const char *const *allowed_values(const std::string &key)
{
  if (key == "network/model")
    return network_models;
  if (key == "cpu/model")
    return cpu_models;
  if (key == "host/model")
    return host_models;
  if (key == "disk/model")
    return disk_models;
  if (key == "network/optim" || key == "cpu/optim")
    return optim_modes;
  if (key == "contexts/factory")
    return factories;
  return nullptr;
}

static std::string first_line(const char *s)
{
  std::string m(s);
  size_t nl = m.find('\n');
  return nl == std::string::npos ? m : m.substr(0, nl);
}

static gboolean apply_cfg(const char *item, GError **error)
{
  const char *colon = strchr(item, ':');
  if (colon == nullptr || colon == item) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--cfg '%s': expected KEY:VALUE, e.g. network/model:CM02", item);
    return FALSE;
  }
  std::string key(item, (size_t)(colon - item)), value(colon + 1);
  /* "help" makes SimGrid print its manual and exit(0) from inside a callback. */
  if (value == "help" || key == "plugin" || key.rfind("contexts/parallel", 0) == 0 ||
      key.rfind("model-check", 0) == 0) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--cfg '%s': this SimGrid setting is not supported by trainsim", item);
    return FALSE;
  }
  /* Parallel contexts run actors on several threads; the actor mode's shares update the
   * backend's state without locks (measured: a crash), and the driver has no actor to run.
   * docs/backends.md, "Speed". */
  if (key == "contexts/nthreads" && value != "1") {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT,
                "--cfg '%s': trainsim runs SimGrid on one thread (the driver has no actors to "
                "run in parallel); expected contexts/nthreads:1",
                item);
    return FALSE;
  }
  /* SimGrid reads "nan" and "inf" as numbers: network/latency-factor:nan ran, and printed a
   * step time. No SimGrid setting means a non-finite number. */
  {
    char *end = nullptr;
    double v = g_ascii_strtod(value.c_str(), &end);
    if (!value.empty() && end != nullptr && *end == '\0' && !std::isfinite(v)) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "--cfg '%s': expected a finite number", item);
      return FALSE;
    }
  }
  if (const char *const *allowed = allowed_values(key)) {
    std::string list;
    gboolean ok = FALSE;
    for (int i = 0; allowed[i] != nullptr; i++) {
      ok = ok || value == allowed[i];
      list += (i > 0 ? ", " : "") + std::string(allowed[i]);
    }
    if (!ok) {
      g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "--cfg '%s': expected one of %s", item,
                  list.c_str());
      return FALSE;
    }
  }
  try {
    simgrid::config::set_as_string(key.c_str(), value);
  } catch (const std::exception &e) {
    /* SimGrid's own words ("Bad config key: foo", "invalid double") said what was wrong but
     * not what was expected: name the key and what it takes. */
    std::string m = first_line(e.what());
    const char *want =
        m.rfind("Bad config key", 0) == 0
            ? "expected a SimGrid setting such as network/model or network/latency-factor, or "
              "a trainsim/... setting (docs/backends.md)"
        : m.find("double") != std::string::npos  ? "expected a number"
        : m.find(" int") != std::string::npos    ? "expected an integer"
        : m.find("boolean") != std::string::npos ? "expected yes or no (also 1/0, on/off)"
                                                 : "expected a value this SimGrid setting takes";
    g_set_error(
        error, TS_ERROR, TS_ERROR_INPUT, "--cfg '%s': %s%s; %s", item, key.c_str(),
        m.rfind("Bad config key", 0) == 0 ? " is not a SimGrid setting" : (": " + m).c_str(), want);
    return FALSE;
  }
  return TRUE;
}

extern "C" gboolean ts_sg_init(const char *const *cfg, GError **error)
{
  if (engine != nullptr) {
    g_set_error(error, TS_ERROR, TS_ERROR_BACKEND,
                "SimGrid is already initialised in this process: it can run one platform per "
                "process (run each simgrid replay in its own process)");
    return FALSE;
  }
  Quiet quiet;
  /* Nothing of SimGrid's may reach the user. A threshold cannot silence CRITICAL (the deadlock
   * report uses it), so the root appender goes to a file: /dev/null unless asked otherwise.
   * xbt_log_no_loc drops the backtrace a failed assertion prints. */
  const char *log = g_getenv("TS_SIMGRID_LOG");
  std::string app = std::string("root.app:file:") + log_target();
  xbt_log_control_set(log != nullptr && *log ? "root.thres:info" : "root.thres:critical");
  xbt_log_control_set(app.c_str());
  xbt_log_no_loc = 1;
  static char prog[] = "trainsim";
  static char *argv[] = {prog, nullptr};
  int argc = 1;
  try {
    engine = new sg4::Engine(&argc, argv);
  } catch (const std::exception &e) {
    g_set_error(error, TS_ERROR, TS_ERROR_BACKEND, "SimGrid refused to start: %s",
                first_line(e.what()).c_str());
    return FALSE;
  }
  for (int i = 0; cfg != nullptr && cfg[i] != nullptr; i++)
    if (!apply_cfg(cfg[i], error))
      return FALSE;
  return TRUE;
}

extern "C" gboolean ts_sg_initialised(void)
{
  return engine != nullptr;
}

/* The zone: hosts numbered in creation order, one-direction links, and routes asked of C. */
class TsZone : public sgr::NetZoneImpl
{
public:
  TsZone(const std::string &name, ts_sg_route_fn fn, void *data, int max_route)
      : NetZoneImpl(name), route_(fn), data_(data), buf_((size_t)max_route)
  {
  }
  std::vector<simgrid::kernel::resource::StandardLinkImpl *> links;
  std::vector<double> latency;

  void get_local_route(const sgr::NetPoint *src, const sgr::NetPoint *dst, sgr::Route *into,
                       double *lat) override
  {
    /* Hosts were added first, so a host's netpoint id is its index. */
    int n = route_(data_, (int)src->id(), (int)dst->id(), buf_.data(), (int)buf_.size());
    for (int i = 0; i < n; i++) {
      into->link_list_.push_back(links[(size_t)buf_[(size_t)i]]);
      if (lat != nullptr)
        *lat += latency[(size_t)buf_[(size_t)i]];
    }
  }

private:
  ts_sg_route_fn route_;
  void *data_;
  std::vector<int> buf_;
};

struct ts_sg_zone {
  TsZone *impl;
};

extern "C" ts_sg_zone *ts_sg_zone_new(const char *name, ts_sg_route_fn route, void *data,
                                      int max_route, GError **error)
{
  Quiet quiet;
  try {
    auto *z = new ts_sg_zone;
    z->impl = new TsZone(name, route, data, max_route);
    return z;
  } catch (const std::exception &e) {
    g_set_error(error, TS_ERROR, TS_ERROR_BACKEND, "SimGrid refused the platform: %s",
                first_line(e.what()).c_str());
    return nullptr;
  }
}

extern "C" sg_host_t ts_sg_zone_add_host(ts_sg_zone *z, const char *name, double speed)
{
  sg4::Host *h = z->impl->create_host(name, std::vector<double>{speed});
  h->seal();
  return h;
}

extern "C" int ts_sg_zone_add_link(ts_sg_zone *z, const char *name, double bandwidth_Bps,
                                   double latency_s)
{
  sg4::Link *l = z->impl->create_link(name, std::vector<double>{bandwidth_Bps});
  l->set_latency(latency_s)->seal();
  z->impl->links.push_back(l->get_impl());
  z->impl->latency.push_back(latency_s);
  return (int)z->impl->links.size() - 1;
}

extern "C" gboolean ts_sg_zone_seal(ts_sg_zone *z, GError **error)
{
  Quiet quiet;
  try {
    z->impl->seal();
    engine->seal_platform();
  } catch (const std::exception &e) {
    g_set_error(error, TS_ERROR, TS_ERROR_BACKEND, "SimGrid refused the platform: %s",
                first_line(e.what()).c_str());
    return FALSE;
  }
  delete z; /* the zone itself belongs to SimGrid now */
  return TRUE;
}

extern "C" gboolean ts_sg_load_xml(const char *path, GError **error)
{
  /* SimGrid aborts on a missing file (xbt_die in the parser); check first. */
  if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
    g_set_error(error, TS_ERROR, TS_ERROR_IO, "%s: no such platform file", path);
    return FALSE;
  }
  Quiet quiet;
  try {
    engine->load_platform(path);
    engine->seal_platform();
  } catch (const std::exception &e) {
    g_set_error(error, TS_ERROR, TS_ERROR_INPUT, "%s: SimGrid refused the platform: %s", path,
                first_line(e.what()).c_str());
    return FALSE;
  }
  return TRUE;
}

extern "C" void ts_sg_spawn(const char *name, sg_host_t host, void (*fn)(void *), void *arg)
{
  actors_alive++;
  sg4::Actor::create(name, host, [fn, arg]() {
    fn(arg);
    actors_alive--;
  });
}

extern "C" void ts_sg_flows(const sg_host_t *src, const sg_host_t *dst, const double *bytes, int n,
                            double *start_s, double *end_s)
{
  std::vector<sg4::CommPtr> comms;
  comms.reserve((size_t)n);
  for (int i = 0; i < n; i++)
    comms.push_back(sg4::Comm::sendto_async(src[i], dst[i], (uint64_t)std::llround(bytes[i])));
  sg4::Comm::wait_all(comms);
  for (int i = 0; i < n; i++) {
    start_s[i] = comms[(size_t)i]->get_start_time();
    end_s[i] = comms[(size_t)i]->get_finish_time();
  }
}

extern "C" void ts_sg_exchange(const sg_mailbox_t *out, const double *bytes, int nout,
                               const sg_mailbox_t *in, int nin, double *start_s, double *end_s)
{
  /* Payloads are never read: the simulation moves sizes, not data. */
  static int payload;
  std::vector<sg4::CommPtr> comms;
  std::vector<void *> got((size_t)nin);
  comms.reserve((size_t)(nout + nin));
  for (int i = 0; i < nout; i++)
    comms.push_back(out[i]->put_async(&payload, (uint64_t)std::llround(bytes[i])));
  for (int j = 0; j < nin; j++)
    comms.push_back(in[j]->get_async<void>(&got[(size_t)j]));
  sg4::Comm::wait_all(comms);
  for (int i = 0; i < nout; i++) {
    start_s[i] = comms[(size_t)i]->get_start_time();
    end_s[i] = comms[(size_t)i]->get_finish_time();
  }
}

extern "C" void ts_sg_execute(double flops)
{
  sg4::this_actor::execute(flops);
}

/* ---- driver mode: flows and timers without actors ----
 *
 * A host-to-host comm started from the simulator's own context (maestro) is reported by
 * SimGrid through Activity::on_completion when it ends (EngineImpl::handle_ended_actions
 * completes activities whose actor is maestro, as for activity graphs), so one callback, not
 * an actor waiting on it, learns of every flow's end. The flow record rides in the comm's
 * data; other activities (actor mode's mailbox comms) have none and are ignored. */

namespace
{
constexpr unsigned FLOW_MAGIC = 0x74736677u;

struct DriverFlow {
  unsigned magic = FLOW_MAGIC;
  ts_sg_flow_done_fn done = nullptr;
  void *data = nullptr;
  sg4::CommPtr comm;
};

/* Flows whose completion is being reported: the comm object is still in use by SimGrid
 * while its on_completion signal runs, so records are freed at the next completion or at the
 * end of the run, not inside their own callback. */
std::vector<DriverFlow *> retired;
bool completion_hooked = false;

void release_retired(const DriverFlow *keep)
{
  size_t k = 0;
  for (DriverFlow *f : retired) {
    if (f == keep)
      retired[k++] = f;
    else
      delete f;
  }
  retired.resize(k);
}

void on_completion(const sg4::Activity &a)
{
  auto *f = a.get_data<DriverFlow>();
  if (f == nullptr || f->magic != FLOW_MAGIC)
    return;
  release_retired(nullptr);
  f->magic = 0;
  retired.push_back(f);
  f->done(f->data, a.get_start_time(), a.get_finish_time());
}
} // namespace

extern "C" void ts_sg_flow_start(sg_host_t src, sg_host_t dst, double bytes,
                                 ts_sg_flow_done_fn done, void *data)
{
  if (!completion_hooked) {
    sg4::Activity::on_completion_cb(on_completion);
    completion_hooked = true;
  }
  auto *f = new DriverFlow;
  f->done = done;
  f->data = data;
  /* Not sendto_async: with a payload of 0 bytes it would never start (Comm::set_destination
   * waits for a size); started explicitly, an empty flow takes its route's latency. */
  f->comm = sg4::Comm::sendto_init(src, dst);
  f->comm->set_payload_size((uint64_t)std::llround(bytes));
  f->comm->set_data(f);
  f->comm->start();
}

struct ts_sg_timer {
  simgrid::kernel::timer::Timer *timer;
  void (*fn)(void *);
  void *data;
};

extern "C" ts_sg_timer *ts_sg_at(double date_s, void (*fn)(void *), void *data)
{
  auto *t = new ts_sg_timer{nullptr, fn, data};
  double now = sg4::Engine::get_clock();
  t->timer = simgrid::kernel::timer::Timer::set(date_s > now ? date_s : now, [t]() {
    void (*f)(void *) = t->fn;
    void *d = t->data;
    delete t;
    f(d);
  });
  return t;
}

extern "C" void ts_sg_timer_cancel(ts_sg_timer *t)
{
  if (t == nullptr)
    return;
  t->timer->remove();
  delete t;
}

extern "C" gboolean ts_sg_run(GError **error)
{
  Quiet quiet;
  gboolean ok = TRUE;
  try {
    engine->run();
  } catch (const std::exception &e) {
    g_set_error(error, TS_ERROR, TS_ERROR_BACKEND, "SimGrid stopped: %s",
                first_line(e.what()).c_str());
    ok = FALSE;
  }
  release_retired(nullptr);
  return ok;
}

extern "C" int ts_sg_actor_count(void)
{
  return actors_alive;
}

extern "C" double ts_sg_clock(void)
{
  return sg4::Engine::get_clock();
}
